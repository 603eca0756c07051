"""The REST door's one mapping from domain errors to the contract's statuses and bodies."""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from calcgraph.db import overloads
from calcgraph.db.dialect import is_retryable
from calcgraph.db.engine import Overloaded
from calcgraph.domain import errors as e
from calcgraph.rest_compat.asgi import HttpMiddleware

log = logging.getLogger("calcgraph.errors")

STATUS: dict[type[e.DomainError], int] = {
    e.InvalidRequest: 400,
    e.Unauthenticated: 401,
    e.PermissionDenied: 403,
    e.NotFound: 404,
    e.MethodNotAllowed: 405,
    e.NotAcceptable: 406,
    e.Conflict: 409,
    e.PayloadTooLarge: 413,
    e.ValidationError: 422,
    e.RateLimited: 429,
    e.QuotaExceeded: 429,
    e.Unavailable: 503,
}

_HTTP_KINDS: dict[int, type[e.DomainError]] = {
    404: e.NotFound,
    405: e.MethodNotAllowed,
    406: e.NotAcceptable,
    413: e.PayloadTooLarge,
}


def status_of(exc: e.DomainError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def render(exc: e.DomainError) -> JSONResponse:
    body: dict[str, Any] = {"detail": f"{exc.kind}: {exc.message}", **exc.extra}
    headers: dict[str, str] = {}
    if isinstance(exc, e.ValidationError):
        body["errors"] = [err.as_dict() for err in exc.errors]
    if isinstance(exc, e.Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="calcgraph"'
    if isinstance(exc, e.RateLimited | e.Unavailable):
        headers["Retry-After"] = str(int(exc.extra.get("retry_after", 1)))
    elif isinstance(exc, e.QuotaExceeded) and "retry_after" in exc.extra:
        headers["Retry-After"] = str(int(exc.extra["retry_after"]))
    return JSONResponse(body, status_code=status_of(exc), headers=headers)


def error_response(exc: BaseException) -> Response:
    if isinstance(exc, e.DomainError):
        return render(exc)
    if isinstance(exc, HTTPException):
        kind = _HTTP_KINDS.get(exc.status_code, e.InvalidRequest)
        message = {
            404: "no such route; see the API specification for the paths",
            405: "this method is not allowed on this path",
        }.get(exc.status_code, str(exc.detail))
        response = render(kind(message))
        response.status_code = exc.status_code
        if exc.status_code == 405 and exc.headers:
            response.headers.update(exc.headers)
        return response
    if is_retryable(exc):
        retry_after = 1
        if isinstance(exc, Overloaded):
            overloads.note(exc)
            retry_after = exc.retry_after
        else:
            log.warning("retryable database error: %s", exc)
        return render(
            e.Unavailable("the database is busy; retry the request", {"retry_after": retry_after})
        )
    log.exception("unexpected error", exc_info=exc)
    return JSONResponse(
        {"detail": "InternalError: an unexpected error occurred; it has been logged"},
        status_code=500,
    )


async def handle(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for domain errors and HTTP exceptions raised by routes."""
    return error_response(exc)


class ErrorMiddleware(HttpMiddleware):
    """Last line: whatever escapes becomes a contract error body, never a stack trace."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            if started:
                log.exception("error after the response started", exc_info=exc)
                return
            await error_response(exc)(scope, receive, send)
