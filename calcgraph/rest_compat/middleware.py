"""Transport rules that hold for every route: body size limit, header versioning and the
`/api/v1` prefix."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calcgraph.domain.errors import NotAcceptable, PayloadTooLarge
from calcgraph.rest_compat.asgi import HttpMiddleware
from calcgraph.rest_compat.errors import render

VENDOR_MEDIA_TYPE = "application/vnd.service.v1+json"


def _media_ranges(accept: str) -> list[str]:
    return [part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()]


class MediaTypeMiddleware(HttpMiddleware):
    """`Accept: application/vnd.service.v1+json` gets JSON under that media type; an Accept
    that names only other vendor media types gets 406."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        ranges = _media_ranges(Headers(scope=scope).get("accept", ""))
        vendor = VENDOR_MEDIA_TYPE in ranges
        if not vendor and ranges and all(r.startswith("application/vnd.") for r in ranges):
            error = NotAcceptable(
                f"this service answers {VENDOR_MEDIA_TYPE} or application/json, "
                f"not {', '.join(ranges)}"
            )
            await render(error)(scope, receive, send)
            return
        if not vendor:
            await self.app(scope, receive, send)
            return

        async def send_vendor(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("application/json"):
                    headers["content-type"] = VENDOR_MEDIA_TYPE
            await send(message)

        await self.app(scope, receive, send_vendor)


class BodyLimitMiddleware(HttpMiddleware):
    """Refuse bodies over the limit, by Content-Length up front or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    def _too_large(self, size: str) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body is {size} bytes; the limit is {self.max_bytes} bytes")

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await render(self._too_large(declared))(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._too_large(f"more than {self.max_bytes}")
            return message

        await self.app(scope, limited_receive, send)


API_PREFIX = "/api/v1"
"""The specification's planned URL prefix (contract 11): every REST route answers under it too."""


class VersionPrefixMiddleware(HttpMiddleware):
    """`/api/v1/<path>` is `/<path>` when `<path>` is a REST route (any method: a wrong one
    gets the route's 405), answered identically by everything behind this middleware. Any
    other path under the prefix (`/api/v1/graphql`, `/api/v1/ui/`, `/api/v2/...`) is left as
    it is, so the router answers 404."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        super().__init__(app)
        self.routes = list(routes)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path.startswith(API_PREFIX + "/"):
            stripped = {**scope, "path": path[len(API_PREFIX) :]}
            if any(route.matches(stripped)[0] != Match.NONE for route in self.routes):
                raw = scope.get("raw_path")
                if isinstance(raw, bytes) and raw.startswith(API_PREFIX.encode()):
                    stripped["raw_path"] = raw[len(API_PREFIX) :]
                scope = stripped
        await self.app(scope, receive, send)
