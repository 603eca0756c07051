"""Calling one ASGI middleware directly, as a given user: the scope an authenticated request
has once authentication ran, and a call that collects the answer without ever reading a body."""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.domain.access.principal import Principal


def scope_of(user: str, path: str = "/jobs") -> Scope:
    principal = Principal(user_id=user, subject=f"sub-{user}", username=user, roles=frozenset())
    return {
        "type": "http",
        "path": path,
        "method": "GET",
        "headers": [],
        "state": {PRINCIPAL_KEY: principal},
    }


async def call(app: Any, scope: Scope) -> tuple[int, dict[str, str], bytes]:
    """The answer's status, headers and body."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body of a refused request is never read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    headers = {k.decode(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])
