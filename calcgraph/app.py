"""The ASGI application factory: two doors (GraphQL and REST) onto one service layer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp

from calcgraph import heap, webui
from calcgraph.auth.authenticate import AuthenticationMiddleware
from calcgraph.auth.setup import build_identity
from calcgraph.builds.local import LocalBuilds
from calcgraph.db.engine import Database
from calcgraph.domain.errors import DomainError
from calcgraph.domain.events.feed.service import EventFeed
from calcgraph.domain.spend import METER
from calcgraph.ops.http import RequestMiddleware
from calcgraph.ops.metrics import Metrics
from calcgraph.ops.socket_census import build_census
from calcgraph.ops.units import cache_units
from calcgraph.rest_compat import api as rest_api
from calcgraph.rest_compat import errors
from calcgraph.rest_compat.middleware import (
    BodyLimitMiddleware,
    MediaTypeMiddleware,
    VersionPrefixMiddleware,
)
from calcgraph.services import Services
from calcgraph.serving.inflight import InFlightLimitMiddleware
from calcgraph.serving.lazy import LazyEndpoint
from calcgraph.serving.loop_share import LoopShareMiddleware
from calcgraph.serving.ratelimit import RateLimitMiddleware, build_limiter, refused_token_throttle
from calcgraph.serving.routing import IndexedRouter
from calcgraph.settings import Settings, get_settings
from calcgraph.sources.git import GitSources
from calcgraph.workers.inprocess import Execution


def create_app(
    settings: Settings | None = None,
    database: Database | None = None,
    *,
    metrics: Metrics | None = None,
) -> Starlette:
    settings = settings or get_settings()
    owns_database = database is None
    # JSON values decoded for a request are charged to its share of the process (contract 8b).
    db = database or Database.from_settings(settings, charged=METER.get)

    def build_graphql() -> ASGIApp:
        # Imported here: Strawberry and the schema build are most of a start (see serving.lazy).
        from strawberry.subscriptions import (
            GRAPHQL_TRANSPORT_WS_PROTOCOL,
            MULTIPART_SUBSCRIPTION_PROTOCOL,
        )

        from calcgraph.schema.view import GraphQLView

        # Subscriptions (runUpdates) over WebSocket (graphql-transport-ws only: the legacy
        # graphql-ws protocol is off) and over plain HTTP as multipart/mixed responses.
        return GraphQLView(
            services,
            sockets,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL, MULTIPART_SUBSCRIPTION_PROTOCOL),
        )

    graphql = LazyEndpoint(build_graphql)
    # The first quantity a request converts builds pint's registry: from cached definitions.
    cache_units()
    identity = build_identity(settings, db)
    # Attaches the outbox to `db`'s write sessions; workers start in the lifespan.
    metrics = metrics or Metrics()
    execution = Execution(settings, db, metrics)
    limiter = build_limiter(settings)
    sockets = build_census(settings)
    # What the doors reach, typed: built here rather than in the lifespan, so that an app
    # served without one (ASGI tests) answers too.
    services = Services(
        settings=settings,
        database=db,
        identity=identity,
        execution=execution.service,
        probes=execution,
        metrics=metrics,
        limiter=limiter,
        builds=LocalBuilds(settings),
        sources=GitSources(settings),
        events=EventFeed(db, execution.notifier, recheck=settings.event_recheck_seconds),
    )

    rest_routes = rest_api.routes()
    routes: list[BaseRoute] = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        *rest_routes,
        *webui.routes,
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if execution.in_process:  # no Redis: this process runs the jobs too
            await asyncio.to_thread(execution.start_workers)
        heap.settle()  # startup's objects leave the collector's generations
        graphql.warm().add_done_callback(lambda _: heap.freeze_late())
        yield
        await services.events.close()
        await execution.close()
        if limiter is not None:
            await limiter.close()
        await sockets.close()
        if owns_database:
            await db.dispose()

    cors: list[Middleware] = []
    if settings.cors_origin_list:
        # Outside everything else: a preflight is answered here, and every answer (errors
        # included) carries the allowed origin. Unset: no CORS headers at all.
        cors.append(
            Middleware(
                CORSMiddleware,
                allow_origins=settings.cors_origin_list,
                allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                allow_headers=["Authorization", "Content-Type"],
                expose_headers=["Retry-After", "X-Request-ID"],
                max_age=600,
            )
        )
    app = Starlette(
        routes=routes,
        middleware=[
            # `/api/v1/<route>` is `<route>` for everything below (contract 11).
            Middleware(VersionPrefixMiddleware, routes=rest_routes),
            *cors,
            # Outermost: request id, metrics and access log see every answer, errors included.
            Middleware(RequestMiddleware, routes=routes, metrics=metrics),
            Middleware(webui.BrowserRootRedirect),
            Middleware(MediaTypeMiddleware),
            Middleware(errors.ErrorMiddleware),
            Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
            # Every routed path outside the contract's public list needs a bearer token.
            Middleware(
                AuthenticationMiddleware,
                authenticator=identity.authenticator,
                routes=routes,
                throttle=refused_token_throttle(limiter, metrics),
                also_public=webui.is_public,
            ),
            # After authentication: one user's requests in flight at once (contract 8b).
            Middleware(InFlightLimitMiddleware, limit=settings.limit_requests_in_flight_per_user),
            # And each user's share of this process's time (contract 8b).
            Middleware(LoopShareMiddleware, per_minute=settings.limit_server_seconds_per_minute),
            # After authentication: the caller is its user when known, else its address.
            Middleware(RateLimitMiddleware, limiter=limiter, metrics=metrics),
        ],
        exception_handlers={HTTPException: errors.handle, DomainError: errors.handle},
        lifespan=lifespan,
    )
    # The same routes and lifespan, tried by their first path segment (see IndexedRouter).
    app.router = IndexedRouter(routes, lifespan=lifespan)
    app.state.services = services
    # The worker side's handle, for the lifespan above and the tests; doors read `services`.
    app.state.execution = execution
    return app
