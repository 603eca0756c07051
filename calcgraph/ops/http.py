"""The outermost middleware: a request id for every request (the caller's `X-Request-ID` when it
is sane), HTTP metrics by route template, and one access-log line. Pure ASGI: it sits on the
check-connection hot path."""

from __future__ import annotations

import itertools
import logging
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.ops.logs import request_id
from calcgraph.ops.metrics import Metrics

access_log = logging.getLogger("calcgraph.access")
REQUEST_ID_HEADER = b"x-request-id"
# Printable, no spaces or quotes: safe to echo in a header and to write into a log line.
_SANE_ID = re.compile(rb"[A-Za-z0-9._:@/+=-]{1,128}")
GRAPHQL_OPERATION_KEY = "calcgraph.graphql_operation"
"""Scope key where the GraphQL schema extension leaves the operation type for the route label."""
UNMATCHED = "<unmatched>"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# A random prefix per process and a counter: unique ids for a fraction of uuid4's cost.
_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count()


class RouteNames:
    """Route templates for metric labels, never raw paths (ids would explode the series)."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self.routes = list(routes)

    def name(self, scope: Scope) -> str:
        # The router leaves the route it chose in the scope (Starlette sets `scope["route"]`).
        route = scope.get("route")
        if route is None:
            # Refused before routing (401, 413, 429, ...) or unknown: the slow path, errors only.
            route = next((r for r in self.routes if r.matches(scope)[0] != Match.NONE), None)
        return str(getattr(route, "path", UNMATCHED))


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER:
            if _SANE_ID.fullmatch(value):
                return str(value.decode("ascii"))
            break
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


class RequestMiddleware:
    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], metrics: Metrics) -> None:
        self.app = app
        self.names = RouteNames(routes)
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        rid = _request_id(scope)
        header = (REQUEST_ID_HEADER, rid.encode("ascii"))
        status = 500
        token = request_id.set(rid)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - began
            route = self.names.name(scope)
            operation = scope.get(GRAPHQL_OPERATION_KEY)
            if operation is not None:
                route = f"{route} {operation}"
            method = scope["method"]
            if method not in KNOWN_METHODS:  # any token is a method: keep the label set bounded
                method = "OTHER"
            self.metrics.observe_request(route, method, status, seconds)
            if access_log.isEnabledFor(logging.INFO):
                _log_access(scope, route, status, seconds)
            request_id.reset(token)


def _log_access(scope: Scope, route: str, status: int, seconds: float) -> None:
    principal: Any = scope.get("state", {}).get(PRINCIPAL_KEY)
    client = scope.get("client")
    access_log.info(
        "%s %s %d",
        scope["method"],
        scope["path"],
        status,
        extra={
            "method": scope["method"],
            "route": route,
            "path": scope["path"],
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
            "user": getattr(principal, "username", None),
            "client": client[0] if client else None,
        },
    )
