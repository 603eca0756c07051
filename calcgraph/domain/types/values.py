"""Values against type expressions: check shape, convert unit-bearing quantities to SI.

Physical scalars travel as JSON numbers in their SI unit; a client may send
`{"value": 12, "unit": "kN"}` instead, which is converted here with pint and refused when
the dimension does not match. Every problem is reported, each located by its path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pint

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.types.catalog import CATALOG, TORSOR_FIELDS, TRIPLE_ELEMENT
from calcgraph.domain.types.expr import DictOf, ListOf, Named, Struct, TypeExpr

Loc = tuple[str | int, ...]


_definitions_cache: list[Path] = []


def cache_unit_definitions(folder: Path) -> None:
    """Keep pint's parsed unit definitions in `folder`, a directory only this user can write
    (pint stores them pickled): a registry built later reads them instead of parsing pint's
    definition files, a tenth of the time. Set before the first `unit_registry()`."""
    _definitions_cache[:] = [folder]


@lru_cache(maxsize=1)
def unit_registry() -> pint.UnitRegistry[Any]:
    # Building the registry parses pint's unit definitions: do it once, on first use. Even
    # importing pint costs ~0.2 s, so a server pays it at its first quantity, not at start.
    import pint

    if _definitions_cache:
        try:
            return pint.UnitRegistry(
                autoconvert_offset_to_baseunit=True, cache_folder=_definitions_cache[0]
            )
        except Exception:  # a cache unreadable for any reason: parse the definitions instead
            # pint writes its cache files in place: one another process was writing (or a
            # crash cut short) does not load. Parsed again below, and the cache starts over.
            for stale in _definitions_cache[0].glob("*"):
                stale.unlink(missing_ok=True)
    return pint.UnitRegistry(autoconvert_offset_to_baseunit=True)


def to_si(value: float, unit: str, type_name: str) -> float:
    """Convert `value` in `unit` to the SI unit of physical type `type_name`."""
    si = CATALOG[type_name].unit
    assert si is not None
    ureg = unit_registry()
    import pint  # already imported by unit_registry(): a dictionary look-up

    try:
        quantity = ureg.Quantity(value, unit)
    except Exception as exc:  # pint raises many kinds on a malformed unit string
        raise ValueError(f"unknown unit {unit!r}") from exc
    try:
        converted = float(quantity.to(si).magnitude)
    except pint.DimensionalityError:
        raise ValueError(
            f"unit {unit!r} is not a {type_name} unit (expected a unit convertible to {si})"
        ) from None
    if not math.isfinite(converted):
        raise ValueError(f"{value} {unit} is not a finite {type_name}")
    return converted


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Checker:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, loc: Loc, msg: str) -> None:
        self.errors.append(FieldError(loc, msg))

    def number(self, value: object, loc: Loc, type_name: str) -> float | int | None:
        if not _is_number(value):
            self.fail(loc, f"expected a number ({type_name}), got {_describe(value)}")
            return None
        assert isinstance(value, int | float)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(loc, f"expected a finite number ({type_name}), got {value}")
            return None
        return value

    def physical(self, value: object, loc: Loc, type_name: str) -> float | None:
        if isinstance(value, Mapping):
            keys = set(value)
            if keys != {"value", "unit"}:
                self.fail(
                    loc,
                    f"a {type_name} quantity is a number in {CATALOG[type_name].unit_symbol} "
                    f"or an object with exactly 'value' and 'unit'",
                )
                return None
            number = self.number(value["value"], (*loc, "value"), type_name)
            unit = value["unit"]
            if not isinstance(unit, str) or not unit.strip():
                self.fail((*loc, "unit"), f"expected a unit string, got {_describe(unit)}")
                return None
            if number is None:
                return None
            try:
                return to_si(float(number), unit, type_name)
            except ValueError as exc:
                self.fail((*loc, "unit"), str(exc))
                return None
        number = self.number(value, loc, type_name)
        return None if number is None else float(number)

    def named(self, value: object, loc: Loc, name: str) -> Any:
        definition = CATALOG[name]
        if definition.kind == "physical":
            return self.physical(value, loc, name)
        if name == "Integer":
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                self.fail(loc, f"expected an integer, got {_describe(value)}")
                return None
            return value
        if name == "Float":
            number = self.number(value, loc, name)
            return None if number is None else float(number)
        if name == "Numeric":
            return self.number(value, loc, name)
        if name == "Boolean":
            if not isinstance(value, bool):
                self.fail(loc, f"expected true or false, got {_describe(value)}")
            return value
        if name == "String":
            if not isinstance(value, str):
                self.fail(loc, f"expected a string, got {_describe(value)}")
            return value
        if name in TRIPLE_ELEMENT:
            if not isinstance(value, list) or len(value) != 3:
                self.fail(loc, f"expected {name} as a list of three numbers [x, y, z]")
                return None
            return [self.named(v, (*loc, i), TRIPLE_ELEMENT[name]) for i, v in enumerate(value)]
        if name == "Torsor":
            fields = Struct(tuple((k, Named(v)) for k, v in TORSOR_FIELDS.items()))
            return self.struct(value, loc, fields)
        if name == "Matrix":
            return self.matrix(value, loc)
        raise AssertionError(f"catalog type without a value rule: {name}")

    def matrix(self, value: object, loc: Loc) -> Any:
        if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
            self.fail(loc, "expected a Matrix as a list of rows, each a list of numbers")
            return None
        widths = {len(row) for row in value}
        if len(widths) > 1:
            self.fail(loc, f"Matrix rows have different lengths: {sorted(widths)}")
            return None
        return [
            [self.named(v, (*loc, i, j), "Float") for j, v in enumerate(row)]
            for i, row in enumerate(value)
        ]

    def struct(self, value: object, loc: Loc, struct: Struct) -> Any:
        if not isinstance(value, Mapping):
            self.fail(loc, f"expected an object with fields {struct}, got {_describe(value)}")
            return None
        fields = struct.field_map()
        for key in value:
            if key not in fields:
                self.fail((*loc, str(key)), f"unexpected field (expected fields of {struct})")
        out: dict[str, Any] = {}
        for key, sub in struct.fields:
            if key not in value:
                self.fail((*loc, key), f"missing field of type {sub}")
            else:
                out[key] = self.value(value[key], (*loc, key), sub)
        return out

    def value(self, value: object, loc: Loc, expr: TypeExpr) -> Any:
        if isinstance(expr, Named):
            return self.named(value, loc, expr.name)
        if isinstance(expr, ListOf):
            if not isinstance(value, list):
                self.fail(loc, f"expected a list ({expr}), got {_describe(value)}")
                return None
            return [self.value(v, (*loc, i), expr.item) for i, v in enumerate(value)]
        if isinstance(expr, DictOf):
            if not isinstance(value, Mapping):
                self.fail(loc, f"expected an object ({expr}), got {_describe(value)}")
                return None
            return {k: self.value(v, (*loc, str(k)), expr.value) for k, v in value.items()}
        return self.struct(value, loc, expr)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def normalize(value: object, expr: TypeExpr, loc: Loc = ()) -> Any:
    """Check `value` against `expr`; return it with every quantity in SI, or raise."""
    checker = _Checker()
    result = checker.value(value, loc, expr)
    if checker.errors:
        raise ValidationError(
            f"value does not match {expr}: {checker.errors[0].msg}", checker.errors
        )
    return result
