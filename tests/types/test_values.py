"""Values against type expressions, and unit-bearing quantities converted to SI with pint."""

from __future__ import annotations

import pytest

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.types.expr import parse_type_expr
from calcgraph.domain.types.values import normalize


def norm(value: object, expr: str) -> object:
    return normalize(value, parse_type_expr(expr))


class TestQuantities:
    @pytest.mark.parametrize(
        ("value", "unit", "expr", "si"),
        [
            (12, "kN", "Force", 12000.0),
            (250, "mm", "Length", 0.25),
            (20, "degC", "Temperature", 293.15),
            (180, "degree", "Angle", 3.141592653589793),
            (3, "MPa", "Stress", 3e6),
            (1, "kN*m", "Moment", 1000.0),
            (36, "km/hour", "Velocity", 10.0),
        ],
    )
    def test_converted_to_si(self, value: float, unit: str, expr: str, si: float) -> None:
        assert norm({"value": value, "unit": unit}, expr) == pytest.approx(si)

    def test_plain_numbers_are_already_si(self) -> None:
        assert norm(12, "Force") == 12.0

    def test_dimension_mismatch_is_refused(self) -> None:
        with pytest.raises(ValidationError) as info:
            norm({"value": 12, "unit": "kg"}, "Force")
        assert "not a Force unit" in info.value.errors[0].msg
        assert info.value.errors[0].loc == ("unit",)

    def test_unknown_unit_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="unknown unit 'kNewtonz'"):
            norm({"value": 1, "unit": "kNewtonz"}, "Force")

    def test_quantity_needs_exactly_value_and_unit(self) -> None:
        with pytest.raises(ValidationError, match="exactly 'value' and 'unit'"):
            norm({"value": 1}, "Force")

    def test_nested_quantities_convert_in_place(self) -> None:
        value = {"force": [{"value": 1, "unit": "kN"}, 0, 0], "moment": [0, 0, 5]}
        assert norm(value, "Torsor") == {"force": [1000.0, 0.0, 0.0], "moment": [0.0, 0.0, 5.0]}

    def test_list_of_quantities(self) -> None:
        assert norm([{"value": 1, "unit": "cm"}, 2], "list[Length]") == [0.01, 2.0]


class TestShapes:
    def test_every_problem_is_reported_with_its_path(self) -> None:
        with pytest.raises(ValidationError) as info:
            norm({"a": "x", "c": 1}, "{a: Force, b: Length}")
        locs = {err.loc for err in info.value.errors}
        assert locs == {("a",), ("b",), ("c",)}

    @pytest.mark.parametrize(
        ("value", "expr"),
        [
            (True, "Float"),
            ("1", "Numeric"),
            (1.5, "Integer"),
            (1, "Boolean"),
            (1, "String"),
            ([1, 2], "Vector3"),
            ([[1, 2], [3]], "Matrix"),
            ({"a": 1}, "list[Float]"),
            ([1], "dict[str, Float]"),
            (float("nan"), "Float"),
        ],
    )
    def test_mismatches_are_refused(self, value: object, expr: str) -> None:
        with pytest.raises(ValidationError):
            norm(value, expr)

    def test_integers_widen_and_whole_floats_narrow(self) -> None:
        assert norm(3, "Float") == 3.0
        assert norm(3.0, "Integer") == 3

    def test_matrix_and_dict(self) -> None:
        assert norm([[1, 2], [3, 4]], "Matrix") == [[1.0, 2.0], [3.0, 4.0]]
        assert norm({"x": {"value": 1, "unit": "kN"}}, "dict[str, Force]") == {"x": 1000.0}
