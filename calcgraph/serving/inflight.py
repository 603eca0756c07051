"""Requests of one user in flight at once (contract 8b: one user must not take the shared
capacity): past `CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER` in one serve process, the next
request is answered 429 `QuotaExceeded` with `Retry-After: 1` before anything else is done for
it (no body read, no database, no parse). One user's flood of slow requests then holds at most
that many of the process's database connections and event loop turns; another user's request
is admitted as before.

Counted per process, in memory: a slot is held from the request's admission to the end of its
answer (a long poll holds its slot while it waits). Anonymous callers are left to the rate
limit (serving.ratelimit), which counts them by address."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.domain.errors import QuotaExceeded
from calcgraph.rest_compat.errors import render

EXEMPT_PATHS = frozenset({"/health", "/metrics"})
RETRY_AFTER_S = 1


class InFlightLimitMiddleware:
    """After authentication (the user is known), before the rate limit and routing."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight: dict[str, int] = {}
        """Requests in flight per user subject; a user with none has no entry."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get("state", {}).get(PRINCIPAL_KEY)
        if (
            self.limit == 0
            or principal is None
            or scope["type"] != "http"
            or scope["path"] in EXEMPT_PATHS
        ):
            await self.app(scope, receive, send)
            return
        key = principal.subject
        held = self.in_flight.get(key, 0)
        if held >= self.limit:
            error = QuotaExceeded(
                f"user {principal.username} has {held} requests in flight, the most one user "
                f"may have (CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER); retry after "
                f"{RETRY_AFTER_S} s",
                {"retry_after": RETRY_AFTER_S},
            )
            await render(error)(scope, receive, send)
            return
        self.in_flight[key] = held + 1
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.in_flight[key] - 1
            if left:
                self.in_flight[key] = left
            else:
                del self.in_flight[key]
