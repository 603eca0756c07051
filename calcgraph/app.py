"""The ASGI application factory: two doors (GraphQL and REST) onto one service layer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route
from strawberry.subscriptions import (
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)

from calcgraph import heap, webui
from calcgraph.auth.authenticate import AuthenticationMiddleware
from calcgraph.auth.setup import build_identity
from calcgraph.db.engine import Database
from calcgraph.domain.errors import DomainError
from calcgraph.ops.http import RequestMiddleware
from calcgraph.ops.metrics import Metrics
from calcgraph.ops.ratelimit import RateLimitMiddleware, build_limiter
from calcgraph.rest_compat import (
    errors,
    openapi,
    routes_auth,
    routes_builds,
    routes_execute,
    routes_health,
    routes_jobs,
    routes_metrics,
    routes_organizations,
    routes_packages,
    routes_publish,
    routes_types,
    routes_workflows,
)
from calcgraph.rest_compat.middleware import BodyLimitMiddleware, MediaTypeMiddleware
from calcgraph.schema.view import GraphQLView
from calcgraph.settings import Settings, get_settings
from calcgraph.workers.inprocess import Execution


def create_app(settings: Settings | None = None, database: Database | None = None) -> Starlette:
    settings = settings or get_settings()
    owns_database = database is None
    db = database or Database(
        settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms
    )
    # Subscriptions (runUpdates) over plain HTTP too: multipart/mixed responses.
    graphql = GraphQLView(
        settings,
        db,
        subscription_protocols=(
            GRAPHQL_TRANSPORT_WS_PROTOCOL,
            GRAPHQL_WS_PROTOCOL,
            MULTIPART_SUBSCRIPTION_PROTOCOL,
        ),
    )
    identity = build_identity(settings, db)
    # Attaches the outbox to `db`'s write sessions; workers start in the lifespan.
    metrics = Metrics()
    execution = Execution(settings, db, metrics)
    limiter = build_limiter(settings)

    routes: list[BaseRoute] = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        *routes_health.routes,
        *routes_metrics.routes,
        *routes_types.routes,
        *routes_auth.routes,
        *routes_organizations.routes,
        *routes_packages.routes,
        *routes_publish.routes,
        *routes_jobs.routes,
        *routes_execute.routes,
        *routes_builds.routes,
        *routes_workflows.routes,
        *openapi.routes,
        *webui.routes,
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if execution.in_process:  # no Redis: this process runs the jobs too
            await asyncio.to_thread(execution.start_workers)
        heap.settle()  # startup's objects leave the collector's generations
        yield
        await execution.close()
        if limiter is not None:
            await limiter.close()
        if owns_database:
            await db.dispose()

    app = Starlette(
        routes=routes,
        middleware=[
            # Outermost: request id, metrics and access log see every answer, errors included.
            Middleware(RequestMiddleware, routes=routes, metrics=metrics),
            Middleware(webui.BrowserRootRedirect),
            Middleware(MediaTypeMiddleware),
            Middleware(errors.ErrorMiddleware),
            Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
            # Every routed path outside the contract's public list needs a bearer token.
            Middleware(
                AuthenticationMiddleware, authenticator=identity.authenticator, routes=routes
            ),
            # After authentication: the caller is its user when known, else its address.
            Middleware(RateLimitMiddleware, limiter=limiter, metrics=metrics),
        ],
        exception_handlers={HTTPException: errors.handle, DomainError: errors.handle},
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.database = db
    app.state.identity = identity
    app.state.execution = execution
    app.state.metrics = metrics
    app.state.limiter = limiter
    return app
