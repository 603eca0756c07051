"""The ASGI GraphQL endpoint, with our typed context."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from calcgraph import webui
from calcgraph.auth.authenticate import current_principal
from calcgraph.db.engine import Database
from calcgraph.schema import build_schema
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Context
from calcgraph.settings import Settings


class GraphQLView(GraphQL[Context, None]):
    def __init__(self, settings: Settings, database: Database, **kwargs: Any) -> None:
        super().__init__(
            build_schema(
                introspection=settings.graphql_introspection,
                max_depth=settings.graphql_max_depth,
                max_aliases=settings.graphql_max_aliases,
                max_tokens=settings.graphql_max_tokens,
            ),
            graphql_ide="graphiql" if settings.graphql_ide else None,
            **kwargs,
        )
        self.settings = settings
        self.database = database

    async def render_graphql_ide(self, request: Request) -> Response:
        # Our own build of GraphiQL (calcgraph/webui, contract 4b), not strawberry's CDN page.
        return webui.graphiql_page()

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        principal = current_principal(request)
        return Context(
            request=request,
            response=response if isinstance(response, Response) else None,
            database=self.database,
            settings=self.settings,
            principal=principal,
            access_loaders=(
                AccessLoaders.build(self.database, principal) if principal is not None else None
            ),
        )
