"""GraphQL types of the type catalog."""

from __future__ import annotations

from enum import Enum

import strawberry

from calcgraph.domain.types.catalog import TypeDef
from calcgraph.domain.types.service import ConnectionCheck
from calcgraph.schema.viewed import FromView, view_fields


@strawberry.enum(description="Whether a source port may be connected to a target port.")
class Compatibility(Enum):
    ALLOWED = "ALLOWED"
    REFUSED = "REFUSED"


@strawberry.type(description="A named type of the shared catalog.")
@view_fields(
    {
        "name": "Canonical name, e.g. `Force`.",
        "parent": "The type this one extends, if any.",
        "kind": "`scalar`, `physical` or `composite`.",
        "unit": "SI unit of a physical scalar.",
        "shape": "Shape of a composite type.",
        "description": "What the type stands for.",
    },
    kind=str,
)
class CatalogType(FromView[TypeDef]):
    @classmethod
    def from_domain(cls, t: TypeDef) -> CatalogType:
        return cls.viewing(t, unit=t.unit_symbol)


@strawberry.type(description="The verdict of the connection rule for two type expressions.")
class ConnectionCheckResult:
    compatibility: Compatibility = strawberry.field(description="ALLOWED or REFUSED.")
    reason: str = strawberry.field(description="The chain followed, or the first fault.")
    source: str = strawberry.field(description="The source expression, normalised.")
    target: str = strawberry.field(description="The target expression, normalised.")

    @classmethod
    def from_domain(cls, result: ConnectionCheck) -> ConnectionCheckResult:
        return cls(
            compatibility=Compatibility(result.compatibility.verdict),
            reason=result.compatibility.reason,
            source=result.source,
            target=result.target,
        )
