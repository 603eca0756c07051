"""Use cases of the type catalog: list it, check a connection between two type expressions."""

from __future__ import annotations

from dataclasses import dataclass

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.types.catalog import CATALOG, TypeDef
from calcgraph.domain.types.compat import Compatibility, check
from calcgraph.domain.types.expr import TypeExpr, TypeExprError, from_json


@dataclass(frozen=True)
class ConnectionCheck:
    source: str
    target: str
    compatibility: Compatibility


def parse(expression: object, field: str) -> TypeExpr:
    """Parse a type expression sent by a client, naming the field on failure."""
    try:
        return from_json(expression)
    except TypeExprError as exc:
        raise ValidationError(
            f"{field} is not a valid type expression: {exc.message}",
            [FieldError(("body", field), exc.message)],
        ) from None


class TypeService:
    def list_types(self) -> list[TypeDef]:
        return list(CATALOG.values())

    def check_connection(self, source: object, target: object) -> ConnectionCheck:
        errors: list[FieldError] = []
        parsed: dict[str, TypeExpr] = {}
        for field, expression in (("source", source), ("target", target)):
            try:
                parsed[field] = parse(expression, field)
            except ValidationError as exc:
                errors.extend(exc.errors)
        if errors:
            raise ValidationError("; ".join(f"{e.loc[-1]}: {e.msg}" for e in errors), errors)
        return ConnectionCheck(
            str(parsed["source"]),
            str(parsed["target"]),
            check(parsed["source"], parsed["target"]),
        )


type_service = TypeService()
