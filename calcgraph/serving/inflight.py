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

from collections.abc import Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import QuotaExceeded
from calcgraph.rest_compat.errors import render
from calcgraph.serving.ratelimit import EXEMPT_PATHS

RETRY_AFTER_S = 1


def counted_caller(scope: Scope) -> Principal | None:
    """The authenticated caller of an HTTP request that a per-user limit counts, else None
    (anonymous callers, sockets, the probes)."""
    principal = scope.get("state", {}).get(PRINCIPAL_KEY)
    if principal is None or scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
        return None
    assert isinstance(principal, Principal)
    return principal


class UserCounts(dict[str, int]):
    """Requests in flight per user subject; a user with none has no entry."""

    @contextmanager
    def holding(self, key: str) -> Iterator[None]:
        self[key] = self.get(key, 0) + 1
        try:
            yield
        finally:
            left = self[key] - 1
            if left:
                self[key] = left
            else:
                del self[key]

    def others(self, key: str) -> int:
        """Requests in flight of every user but `key`."""
        return sum(self.values()) - self.get(key, 0)


class PerUserLimit:
    """A per-user limit of a serve process, after authentication (the user is known), before
    routing: a counted caller (`counted_caller`) past it is answered 429 `QuotaExceeded` with
    its `Retry-After` before anything else is done for the request; one within it is
    `admit`ted. Every other request goes straight on, as all do while the limit is off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def off(self) -> bool:
        raise NotImplementedError

    def refusal(self, principal: Principal) -> tuple[str, int] | None:
        """Why `principal`'s request is refused now, and in how many seconds to retry."""
        raise NotImplementedError

    async def admit(self, principal: Principal, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = counted_caller(scope)
        if self.off() or principal is None:
            await self.app(scope, receive, send)
            return
        refused = self.refusal(principal)
        if refused is None:
            await self.admit(principal, scope, receive, send)
            return
        message, retry_after = refused
        error = QuotaExceeded(
            f"{message}; retry after {retry_after} s", {"retry_after": retry_after}
        )
        await render(error)(scope, receive, send)


class InFlightLimitMiddleware(PerUserLimit):
    """Before the rate limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit
        self.in_flight = UserCounts()

    def off(self) -> bool:
        return self.limit == 0

    def refusal(self, principal: Principal) -> tuple[str, int] | None:
        held = self.in_flight.get(principal.subject, 0)
        if held < self.limit:
            return None
        return (
            f"user {principal.username} has {held} requests in flight, the most one user "
            f"may have (CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER)",
            RETRY_AFTER_S,
        )

    async def admit(self, principal: Principal, scope: Scope, receive: Receive, send: Send) -> None:
        with self.in_flight.holding(principal.subject):
            await self.app(scope, receive, send)
