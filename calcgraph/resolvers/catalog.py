"""Query fields of the type catalog: thin calls into the type service."""

from __future__ import annotations

import strawberry

from calcgraph.domain.types.service import type_service
from calcgraph.schema.catalog import CatalogType, ConnectionCheckResult


@strawberry.type
class CatalogQuery:
    @strawberry.field(description="Every type of the shared catalog.")
    def types(self) -> list[CatalogType]:
        return [CatalogType.from_domain(t) for t in type_service.list_types()]

    @strawberry.field(
        description="May a port of type `source` feed a port of type `target`? Public."
    )
    def check_connection(self, source: str, target: str) -> ConnectionCheckResult:
        return ConnectionCheckResult.from_domain(type_service.check_connection(source, target))
