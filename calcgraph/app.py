"""The ASGI application factory: two doors (GraphQL and REST) onto one service layer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from calcgraph.db.engine import Database
from calcgraph.domain.errors import DomainError
from calcgraph.rest_compat import errors, routes_health, routes_types
from calcgraph.rest_compat.middleware import BodyLimitMiddleware, MediaTypeMiddleware
from calcgraph.schema.view import GraphQLView
from calcgraph.settings import Settings, get_settings


def create_app(settings: Settings | None = None, database: Database | None = None) -> Starlette:
    settings = settings or get_settings()
    owns_database = database is None
    db = database or Database(
        settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms
    )
    graphql = GraphQLView(settings, db)

    routes: list[BaseRoute] = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        *routes_health.routes,
        *routes_types.routes,
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owns_database:
            await db.dispose()

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(MediaTypeMiddleware),
            Middleware(errors.ErrorMiddleware),
            Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        ],
        exception_handlers={HTTPException: errors.handle, DomainError: errors.handle},
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.database = db
    return app
