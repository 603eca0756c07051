"""One exception per error kind of the contract (section 2), parsed once from a response.

Every error body is `{"detail": "<Kind>: <message>", ...}`; the kind picks the class (the
status is the fallback when a body has no known kind, e.g. a proxy's own error page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx


class CalcgraphError(Exception):
    """An error answer of the API, or (subclass `ConnectionError`) no answer at all."""

    kind = "Error"

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        errors: list[dict[str, Any]] | None = None,
        report: dict[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors: list[dict[str, Any]] = errors or []
        self.report = report
        self.body: Mapping[str, Any] = body or {}

    @property
    def message(self) -> str:
        """The human message without its `<Kind>: ` prefix."""
        prefix = f"{self.kind}: "
        return self.detail[len(prefix) :] if self.detail.startswith(prefix) else self.detail


class InvalidRequest(CalcgraphError):
    kind = "InvalidRequest"


class Unauthenticated(CalcgraphError):
    kind = "Unauthenticated"


class PermissionDenied(CalcgraphError):
    kind = "PermissionDenied"


class NotFound(CalcgraphError):
    kind = "NotFound"


class MethodNotAllowed(CalcgraphError):
    kind = "MethodNotAllowed"


class NotAcceptable(CalcgraphError):
    kind = "NotAcceptable"


class Conflict(CalcgraphError):
    kind = "Conflict"


class PayloadTooLarge(CalcgraphError):
    kind = "PayloadTooLarge"


class ValidationError(CalcgraphError):
    kind = "ValidationError"


class _RetryLater(CalcgraphError):
    """An answer that may say how long to wait before trying again (its Retry-After)."""

    def __init__(self, detail: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(detail, **kw)
        self.retry_after = retry_after


class RateLimited(_RetryLater):
    kind = "RateLimited"


class InternalError(CalcgraphError):
    kind = "InternalError"


class Unavailable(InternalError, _RetryLater):
    """503: the server is up but cannot answer now (a busy database); retry later."""

    kind = "Unavailable"


# Shadows the builtin inside this package on purpose: `calcgraph.client.ConnectionError` is the
# name users look for, and it is a CalcgraphError, caught with the others.
class ConnectionError(CalcgraphError):
    """The server could not be reached (refused, DNS, timeout): no status, no body."""

    kind = "ConnectionError"


_BY_KIND: dict[str, type[CalcgraphError]] = {
    cls.kind: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        PermissionDenied,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        Conflict,
        PayloadTooLarge,
        ValidationError,
        RateLimited,
        InternalError,
        Unavailable,
    )
}
_BY_STATUS: dict[int, type[CalcgraphError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


def error_from_response(response: httpx.Response) -> CalcgraphError:
    """The exception for an error response: kind from the `detail` prefix, else the status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    detail = body.get("detail")
    if not isinstance(detail, str):
        text = response.text.strip()[:200]
        detail = f"HTTP {response.status_code}" + (f": {text}" if text else "")
    kind = detail.split(":", 1)[0] if ":" in detail else ""
    cls = _BY_KIND.get(kind) or _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = InternalError if response.status_code >= 500 else CalcgraphError
    errors = body.get("errors") if isinstance(body.get("errors"), list) else None
    report = body.get("report") if isinstance(body.get("report"), dict) else None
    common: dict[str, Any] = {
        "status": response.status_code,
        "errors": errors,
        "report": report,
        "body": body,
    }
    if issubclass(cls, _RetryLater):
        return cls(detail, retry_after=_retry_after(response), **common)
    return cls(detail, **common)
