"""Names a GraphQL request's operation type for the HTTP metrics (`/graphql mutation`)."""

from __future__ import annotations

from collections.abc import Iterator

from strawberry.extensions import SchemaExtension

from calcgraph.ops.http import GRAPHQL_OPERATION_KEY


class OperationLabel(SchemaExtension):
    def on_execute(self) -> Iterator[None]:
        context = self.execution_context.context
        request = getattr(context, "request", None)
        scope = getattr(request, "scope", None)
        if isinstance(scope, dict):
            scope[GRAPHQL_OPERATION_KEY] = self.execution_context.operation_type.value
        yield
