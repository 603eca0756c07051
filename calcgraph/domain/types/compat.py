"""The connection rule: may a source port of type S feed a target port of type T?

Named types connect when they lie on one ancestor/descendant chain of the catalog. Lists and
dicts compare element-wise, structs field-wise (an extra or a missing field is refused), and the
struct-shaped composite Torsor compares with an inline struct through its fields.

One deliberate widening: Integer feeds Float and its descendants. The specification's table
lists "Integer to Float" as allowed although both extend Numeric; an integer is a real number
with no fraction, so widening loses nothing. Float to Integer stays refused: it would.
"""

from __future__ import annotations

from dataclasses import dataclass

from calcgraph.domain.types.catalog import TORSOR_FIELDS, ancestors
from calcgraph.domain.types.expr import DictOf, ListOf, Named, Struct, TypeExpr


@dataclass(frozen=True)
class Compatibility:
    allowed: bool
    reason: str

    @property
    def verdict(self) -> str:
        return "ALLOWED" if self.allowed else "REFUSED"


def _chain(lower: str, upper: str) -> str:
    path = ancestors(lower)
    return " -> ".join(path[: path.index(upper) + 1])


def _named(source: str, target: str) -> Compatibility:
    if source == target:
        return Compatibility(True, f"same type: {source}")
    up_s, up_t = ancestors(source), ancestors(target)
    if target in up_s:
        return Compatibility(True, f"{_chain(source, target)} (target is an ancestor)")
    if source in up_t:
        return Compatibility(True, f"{_chain(target, source)} (target is a descendant)")
    if source == "Integer" and "Float" in up_t:
        if target == "Float":
            return Compatibility(True, "Integer widens to Float")
        return Compatibility(True, f"Integer widens to Float; {_chain(target, 'Float')}")
    common = next((a for a in up_s if a in up_t), None)
    if common is not None:
        return Compatibility(
            False, f"{source} and {target} are not on one chain: both descend from {common}"
        )
    return Compatibility(
        False,
        f"{source} and {target} have different roots ({up_s[-1]} and {up_t[-1]})",
    )


def _shape(expr: TypeExpr) -> str:
    if isinstance(expr, ListOf):
        return "a list"
    if isinstance(expr, DictOf):
        return "a dict"
    if isinstance(expr, Struct):
        return "a struct"
    return f"the named type {expr.name}"


def _as_struct(expr: TypeExpr) -> Struct | None:
    if isinstance(expr, Struct):
        return expr
    if isinstance(expr, Named) and expr.name == "Torsor":
        return Struct(tuple((k, Named(v)) for k, v in TORSOR_FIELDS.items()))
    return None


def _nested(prefix: str, inner: Compatibility) -> Compatibility:
    return Compatibility(inner.allowed, f"{prefix}: {inner.reason}")


def _structs(source: Struct, target: Struct) -> Compatibility:
    s_fields, t_fields = source.field_map(), target.field_map()
    for name in s_fields:
        if name not in t_fields:
            return Compatibility(False, f"source field {name!r} does not exist in the target")
    for name in t_fields:
        if name not in s_fields:
            return Compatibility(False, f"target field {name!r} is missing from the source")
    for name, s_type in source.fields:
        inner = check(s_type, t_fields[name])
        if not inner.allowed:
            return _nested(f"field {name!r}", inner)
    return Compatibility(True, "every field is compatible")


def check(source: TypeExpr, target: TypeExpr) -> Compatibility:
    """Decide a connection from `source` to `target`, with a reason naming the chain or fault."""
    if isinstance(source, Named) and isinstance(target, Named):
        return _named(source.name, target.name)
    if isinstance(source, ListOf) and isinstance(target, ListOf):
        inner = check(source.item, target.item)
        return _nested("list element", inner)
    if isinstance(source, DictOf) and isinstance(target, DictOf):
        inner = check(source.value, target.value)
        return _nested("dict value", inner)
    s_struct, t_struct = _as_struct(source), _as_struct(target)
    if s_struct is not None and t_struct is not None:
        return _structs(s_struct, t_struct)
    return Compatibility(False, f"{source} is {_shape(source)} and {target} is {_shape(target)}")
