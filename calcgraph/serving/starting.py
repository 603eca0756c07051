"""`calcgraph serve`'s application while it starts: /health answers as soon as the server
listens, and the application proper is imported, built and started meanwhile.

Importing the application (its doors, services, workers, identity stack) is most of a start,
about a second on a small machine. The server listens without it: a thread imports it, the
event loop then builds it and runs its lifespan (the in-process workers start there). Until
that is done, `GET /health` is answered by the same readiness check the application's route
uses (the database, and Redis when configured), through the same request-id, metrics and
access-log middleware; every other request, and every WebSocket, waits for the application
and is then served by it, so none is refused or answered by a half-built one. Should the
build fail, everything answers 503 from then on and the server is asked to stop.

Once started, and without CORS configured, the plain probe (`GET`/`HEAD /health` with no body, no
`Origin` and no vendor `Accept`) is still answered here, by the application's own readiness check
(its database, its Redis probe) behind the same request-id, metrics and access-log middleware: the
same answer the application's route gives, without its routing and the middleware that does nothing
for it (media type, body limit, authentication, rate limit, errors, pydantic), about a third of a
probe's CPU in the server. Any other /health request is the application's.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from calcgraph.db.engine import Database
from calcgraph.domain.spend import METER
from calcgraph.ops.health import readiness
from calcgraph.ops.http import RequestMiddleware
from calcgraph.ops.metrics import Metrics
from calcgraph.services import Probes, services_of
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph")

_EARLY_METHODS = frozenset({"GET", "HEAD"})
# A /health request with one of these is the application's: CORS, the body limit.
_APPLICATION_HEADERS = frozenset({b"origin", b"content-length", b"transfer-encoding"})
APPLICATION_READY = "the application is ready, %.2fs after the server listened"


class AppFactory(Protocol):
    """`calcgraph.app.create_app`."""

    def __call__(
        self, settings: Settings, database: Database, *, metrics: Metrics
    ) -> Starlette: ...


def _import_factory() -> AppFactory:
    module = importlib.import_module("calcgraph.app")
    factory: AppFactory = module.create_app
    return factory


class StartingApp:
    """The ASGI application uvicorn serves; see the module's docstring."""

    def __init__(
        self,
        settings: Settings,
        import_factory: Callable[[], AppFactory] = _import_factory,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        # JSON values decoded for a request are charged to its share of the process (8b).
        self.database = Database.from_settings(settings, charged=METER.get)
        self.metrics = Metrics()
        self._import_factory = import_factory
        self._on_failure = on_failure or _stop_server
        self._app: Starlette | None = None
        self._done = asyncio.Event()
        self._started: asyncio.Task[None] | None = None
        self._lifespans = contextlib.AsyncExitStack()
        self._redis: Any = None
        route = Route("/health", self._health, methods=["GET"])
        self._health_route = route
        # Only the early answers pass here; the application has its own middleware.
        self._early = Starlette(
            routes=[route],
            middleware=[Middleware(RequestMiddleware, routes=[route], metrics=self.metrics)],
        )
        self._probes: Probes | None = None  # the application's, once started
        self._probe = RequestMiddleware(self._ready_health, routes=[route], metrics=self.metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is not None:
            if self._probes is not None and scope["type"] == "http" and _plain_probe(scope):
                await self._probe(scope, receive, send)
            else:
                await app(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif self._early_health(scope):  # while starting, or after a failed start
            await self._early(scope, receive, send)
        else:
            await self._done.wait()
            if self._app is None:  # it failed: nothing here can answer truly but "unavailable"
                await _unavailable(scope, receive, send)
            else:
                await self._app(scope, receive, send)

    @property
    def application(self) -> Starlette | None:
        """The application once started, else None."""
        return self._app

    async def wait_started(self) -> bool:
        """Whether the application started (tests; requests wait the same way)."""
        await self._done.wait()
        return self._app is not None

    def _early_health(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["path"] != "/health":
            return False
        if scope["method"] not in _EARLY_METHODS:
            return False  # the application's 405, with its error body
        # A browser's request from another origin needs the application's CORS headers.
        return not any(name == b"origin" for name, _ in scope["headers"])

    async def _health(self, request: Request) -> JSONResponse:
        status, body = await readiness(self.database, self._redis_reachable)
        if self._done.is_set() and self._app is None:  # it failed to start: the server stops
            status, body = 503, {**body, "status": "unavailable"}
        return JSONResponse(body, status_code=status)

    async def _ready_health(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The started application's /health answer (its route's, see the module docstring)."""
        assert self._probes is not None
        status, body = await readiness(self.database, self._probes.redis_reachable)
        scope["route"] = self._health_route  # the metrics' route label, as the router sets it
        await JSONResponse(body, status_code=status)(scope, receive, send)

    async def _redis_reachable(self) -> bool | None:
        if self.settings.redis_url is None:
            return None
        if self._redis is None:
            from calcgraph.ops.redis_clients import async_client

            self._redis = async_client(self.settings.redis_url.get_secret_value())
        try:
            return bool(await self._redis.ping())
        except Exception:  # redis.RedisError, OSError: reported, not raised
            return False

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self._started = asyncio.get_running_loop().create_task(self._start())
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await self._stop()
        except BaseException:
            log.exception("the application did not stop cleanly")
            await send({"type": "lifespan.shutdown.failed", "message": "see the log"})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _start(self) -> None:
        began = time.perf_counter()
        try:
            # The import is the long part: in a thread, so the loop keeps answering /health.
            factory = await asyncio.to_thread(self._import_factory)
            app = factory(self.settings, self.database, metrics=self.metrics)
            app.middleware_stack = app.build_middleware_stack()
            await self._lifespans.enter_async_context(app.router.lifespan_context(app))
            if not self.settings.cors_origin_list:  # else every answer is CORS's (Vary)
                self._probes = services_of(app).probes
            self._app = app
            log.info(APPLICATION_READY, time.perf_counter() - began)
        except Exception:
            log.exception("the application did not start; stopping")
            self._on_failure()
        finally:
            # The early Redis client stays until shutdown: an early /health may still use it.
            self._done.set()

    async def _stop(self) -> None:
        if self._started is not None:
            if not self._done.is_set():
                # Stopped while starting: let the start finish, then undo it in order.
                await asyncio.shield(self._started)
        await self._lifespans.aclose()
        await self._close_redis()
        await self.database.dispose()

    async def _close_redis(self) -> None:
        if self._redis is not None:
            redis, self._redis = self._redis, None
            with contextlib.suppress(Exception):
                await redis.aclose()


def _plain_probe(scope: Scope) -> bool:
    """A /health request the application's middleware would pass through untouched."""
    if scope["path"] != "/health" or scope["method"] not in _EARLY_METHODS:
        return False  # the application's 405
    for name, value in scope["headers"]:
        if name in _APPLICATION_HEADERS:
            return False
        if name == b"accept" and b"vnd." in value.lower():
            return False  # the vendor media type, or its 406
    return True


async def _unavailable(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1011})
        return
    response = JSONResponse(
        {"detail": "Unavailable: the server failed to start; see its log"}, status_code=503
    )
    await response(scope, receive, send)


_failed_starts: list[str] = []


def start_failed() -> bool:
    """Whether an application of this process failed to start (`serve` then exits 1)."""
    return bool(_failed_starts)


def _stop_server() -> None:
    """Ask uvicorn to shut down, as Ctrl-C would: its handler makes a graceful exit."""
    _failed_starts.append("start")
    os.kill(os.getpid(), signal.SIGTERM)
