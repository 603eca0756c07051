"""`graphql-transport-ws` on `/graphql` (contract section 4b): the bearer token travels in the
`connection_init` payload as `{"Authorization": "Bearer <token>"}`, since a browser cannot set
headers on a WebSocket. A missing or invalid token closes the socket with 4401; a valid one
makes its principal the connection's caller, so every operation meets the same rules as over
HTTP.

Contract 8b, what one user may spend: `connection_init` must come within
`CALCGRAPH_LIMIT_SOCKET_INIT_SECONDS` (else 4408, strawberry's timeout); at most
`CALCGRAPH_LIMIT_PENDING_SOCKETS_PER_ADDRESS` sockets not yet authenticated per client address
and `CALCGRAPH_LIMIT_SOCKETS_PER_USER` open sockets per user (4429, `QuotaExceeded: ...`),
counted across every serve process through Redis when it is configured
(`calcgraph.ops.socket_census`); the
socket closes with 4401 when its token expires, and an operation sent on an expired token
closes it too, before it runs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol, cast

from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    SubscribeMessage,
)

from calcgraph.auth.authenticate import Authenticator
from calcgraph.db.dialect import is_retryable
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import DomainError
from calcgraph.ops.socket_census import Seat, SocketCensus
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Context

UNAUTHORIZED = 4401
TOO_MANY = 4429
TRY_AGAIN = 1013
"""RFC 6455 "Try Again Later": the database could not take the sign-in now."""
_BUSY = "Unavailable: the server is busy; connect again later"


class _TryAgain(Exception):
    """Authenticating met a database error that a retry may not meet."""


# A WebSocket close reason is at most 123 bytes (RFC 6455, section 5.5).
_MAX_REASON = 120


def _authorization(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    for key, value in payload.items():
        if isinstance(key, str) and key.lower() == "authorization" and isinstance(value, str):
            return value
    return None


class HasSockets(Protocol):
    sockets: SocketCensus


class AuthenticatedTransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    _seat: Seat | None = None
    _expiry: asyncio.Task[None] | None = None

    async def handle(self) -> None:
        census = cast(HasSockets, self.view).sockets
        client = self.context.request.client
        seat = Seat(client.host if client is not None else "")
        refused = await census.arrive(seat)
        if refused is not None:
            await self.websocket.close(code=TOO_MANY, reason=refused[:_MAX_REASON])
            return
        self._seat = seat
        try:
            await super().handle()
        finally:
            if self._expiry is not None:
                self._expiry.cancel()
            await census.leave(seat)

    async def handle_task_exception(self, error: Exception) -> None:
        # A client that leaves while its subscription sends (a page closed, a network gone) is
        # not a server error: the operation ends without a traceback in the log. Any other
        # failure of an operation's task is still logged with its traceback.
        if isinstance(error, WebSocketDisconnected):
            return
        await super().handle_task_exception(error)

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        principal = self.context.principal
        if principal is not None and await self._closed_when_expired(principal):
            return
        await super().handle_subscribe(message)

    async def _closed_when_expired(self, principal: Principal) -> bool:
        try:
            principal.require_current()
        except DomainError as exc:
            await self.websocket.close(code=UNAUTHORIZED, reason=str(exc)[:_MAX_REASON])
            return True
        return False

    async def _close_at_expiry(self, principal: Principal) -> None:
        left = principal.seconds_left()
        if left is None:
            return
        await asyncio.sleep(max(0.0, left))
        with contextlib.suppress(Exception):  # already closed by the client
            await self._closed_when_expired(principal)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        # Only the first, well-formed init authenticates; the base class answers the rest
        # (4429 for a second init, 4400 for a payload that is not an object).
        first = not self.connection_init_received and not self.connection_timed_out
        payload = message.get("payload", {})
        if first and isinstance(payload, dict):
            # The init came in time: verifying its token (a JWKS fetch, a first sign-in's
            # write) may take longer than the init timeout, which no longer applies.
            if self.connection_init_timeout_task:
                self.connection_init_timeout_task.cancel()
            try:
                reason = await self._authenticate(payload)
            except _TryAgain:
                self.connection_init_received = True
                await self.websocket.close(code=TRY_AGAIN, reason=_BUSY)
                return
            if reason is not None:
                self.connection_init_received = True
                if self.connection_init_timeout_task:
                    self.connection_init_timeout_task.cancel()
                await self.websocket.close(code=UNAUTHORIZED, reason=reason[:_MAX_REASON])
                return
            principal = self.context.principal
            if principal is not None and self._seat is not None:
                census = cast(HasSockets, self.view).sockets
                refused = await census.authenticate(self._seat, principal.user_id)
                if refused is None:
                    self._expiry = asyncio.create_task(self._close_at_expiry(principal))
                else:
                    self.connection_init_received = True
                    if self.connection_init_timeout_task:
                        self.connection_init_timeout_task.cancel()
                    await self.websocket.close(code=TOO_MANY, reason=refused[:_MAX_REASON])
                    return
        await super().handle_connection_init(message)

    async def _authenticate(self, payload: dict[str, Any]) -> str | None:
        """None when the payload's token is valid (the context now holds its principal), else
        why not."""
        header = _authorization(payload)
        if header is None:
            return 'Unauthenticated: send {"Authorization": "Bearer <token>"} in connection_init'
        context = self.context
        authenticator: Authenticator = context.services.identity.authenticator
        try:
            principal = await authenticator.authenticate(header)
        except DomainError as exc:
            return str(exc)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            # A first sign-in's write met a busy database: the socket is closed (the client
            # tries again) rather than failing as an error of the application.
            raise _TryAgain from exc
        context.principal = principal
        context.access_loaders = AccessLoaders.build(context.database, principal)
        return None
