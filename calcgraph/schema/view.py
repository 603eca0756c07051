"""The ASGI GraphQL endpoint, with our typed context."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from calcgraph.db.engine import Database
from calcgraph.schema import build_schema
from calcgraph.schema.context import Context
from calcgraph.settings import Settings


class GraphQLView(GraphQL[Context, None]):
    def __init__(self, settings: Settings, database: Database, **kwargs: Any) -> None:
        super().__init__(
            build_schema(introspection=settings.graphql_introspection),
            graphql_ide="graphiql" if settings.graphql_ide else None,
            **kwargs,
        )
        self.settings = settings
        self.database = database

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        return Context(
            request=request,
            response=response if isinstance(response, Response) else None,
            database=self.database,
            settings=self.settings,
        )
