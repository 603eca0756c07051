"""`graphql-transport-ws` on `/graphql` (contract section 4b): the bearer token travels in the
`connection_init` payload as `{"Authorization": "Bearer <token>"}`, since a browser cannot set
headers on a WebSocket. A missing or invalid token closes the socket with 4401; a valid one
makes its principal the connection's caller, so every operation meets the same rules as over
HTTP."""

from __future__ import annotations

from typing import Any

from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ConnectionInitMessage

from calcgraph.auth.authenticate import Authenticator
from calcgraph.domain.errors import DomainError
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Context

UNAUTHORIZED = 4401
# A WebSocket close reason is at most 123 bytes (RFC 6455, section 5.5).
_MAX_REASON = 120


def _authorization(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    for key, value in payload.items():
        if isinstance(key, str) and key.lower() == "authorization" and isinstance(value, str):
            return value
    return None


class AuthenticatedTransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        # Only the first, well-formed init authenticates; the base class answers the rest
        # (4429 for a second init, 4400 for a payload that is not an object).
        first = not self.connection_init_received and not self.connection_timed_out
        payload = message.get("payload", {})
        if first and isinstance(payload, dict):
            reason = await self._authenticate(payload)
            if reason is not None:
                self.connection_init_received = True
                if self.connection_init_timeout_task:
                    self.connection_init_timeout_task.cancel()
                await self.websocket.close(code=UNAUTHORIZED, reason=reason[:_MAX_REASON])
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
        context.principal = principal
        context.access_loaders = AccessLoaders.build(context.database, principal)
        return None
