"""Input values as people type them: `12 kN` is the contract's `{"value": 12, "unit": "kN"}`
(the server converts it to SI with pint and refuses a wrong dimension), JSON stays JSON."""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# A unit starts with a letter (or µ, °, %), so "3 4" or "12 -" are not quantities.
_QUANTITY = re.compile(rf"^\s*(?P<value>{_NUMBER})(?![eE][-+]?\d)\s*(?P<unit>[A-Za-zµμΩ°%].*?)\s*$")


def quantity(value: float, unit: str) -> dict[str, Any]:
    """The wire form of a physical value in any unit: `quantity(12, "kN")`."""
    return {"value": value, "unit": unit}


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_quantity(text: str) -> dict[str, Any] | None:
    """`"12 kN"` -> `{"value": 12, "unit": "kN"}`, `"557 cm**3"` and `"3.5e-3 m"` too;
    None when the text is not a number followed by a unit."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    return quantity(_number(match["value"]), match["unit"])


def parse_value(text: str) -> Any:
    """A command-line input value: JSON when it parses (`3`, `true`, `[1, 2]`, `{"a": 1}`),
    else a quantity (`12 kN`), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    found = parse_quantity(text)
    return found if found is not None else text


def parse_assignment(text: str) -> tuple[str, Any]:
    """`key=value` with `parse_value` applied to the value."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"an input is KEY=VALUE, not {text!r}")
    return key.strip(), parse_value(value)


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    return dict(parse_assignment(item) for item in items or [])
