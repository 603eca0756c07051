"""The GraphQL schema, composed at the root from each feature's Query and Mutation mixins."""

from __future__ import annotations

import logging

import strawberry
from graphql.error import GraphQLError
from strawberry.extensions import DisableIntrospection, SchemaExtension
from strawberry.types import ExecutionContext

from calcgraph.domain.errors import DomainError
from calcgraph.resolvers.catalog import CatalogQuery
from calcgraph.schema.errors import ContractErrors

log = logging.getLogger("calcgraph.graphql")


@strawberry.type(description="Read access to calcgraph.")
class Query(CatalogQuery):
    pass


class Schema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures (domain errors, bad query documents) are answers, not incidents.
        for error in errors:
            original = error.original_error
            if original is not None and not isinstance(original, DomainError):
                log.error("unexpected GraphQL error", exc_info=original)


def build_schema(*, introspection: bool = True) -> strawberry.Schema:
    extensions: list[type[SchemaExtension]] = [ContractErrors]
    if not introspection:
        extensions.append(DisableIntrospection)
    return Schema(query=Query, extensions=extensions)
