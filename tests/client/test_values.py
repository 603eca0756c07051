"""Input values as typed on a command line or in a notebook."""

from __future__ import annotations

import pytest

from calcgraph.client.values import (
    parse_assignment,
    parse_assignments,
    parse_quantity,
    parse_value,
    quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12 kN", {"value": 12, "unit": "kN"}),
        ("12kN", {"value": 12, "unit": "kN"}),
        ("3.5e-3 m", {"value": 0.0035, "unit": "m"}),
        ("-40 degC", {"value": -40, "unit": "degC"}),
        ("557 cm**3", {"value": 557, "unit": "cm**3"}),
        ("9.81 m/s^2", {"value": 9.81, "unit": "m/s^2"}),
        ("  210 GPa ", {"value": 210, "unit": "GPa"}),
        (".5 mm", {"value": 0.5, "unit": "mm"}),
        ("1 µm", {"value": 1, "unit": "µm"}),
    ],
)
def test_quantities(text: str, expected: dict[str, object]) -> None:
    parsed = parse_quantity(text)
    assert parsed == expected
    assert type(parsed["value"]) is type(expected["value"])  # type: ignore[index]
    assert parse_value(text) == expected


@pytest.mark.parametrize("text", ["kN", "12", "3 4", "12 -", "", "m 12", "1e3"])
def test_not_quantities(text: str) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", 3),
        ("2.5", 2.5),
        ("true", True),
        ("null", None),
        ("[1, 2]", [1, 2]),
        ('{"value": 3, "unit": "m"}', {"value": 3, "unit": "m"}),
        ('"12 kN"', "12 kN"),  # quoted: JSON text wins over the quantity reading
        ("steel S355", "steel S355"),
        ("", ""),
    ],
)
def test_values_json_then_quantity_then_text(text: str, expected: object) -> None:
    assert parse_value(text) == expected


def test_assignments() -> None:
    assert parse_assignment("load=12 kN") == ("load", quantity(12, "kN"))
    assert parse_assignment(" n = 3") == ("n", 3)
    assert parse_assignment("expr=a=b") == ("expr", "a=b")
    assert parse_assignments(["a=1", "b=x", "a=2"]) == {"a": 2, "b": "x"}
    assert parse_assignments(None) == {}
    for bad in ("novalue", "=3"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_assignment(bad)
