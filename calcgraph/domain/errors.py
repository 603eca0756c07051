"""The one error hierarchy of the domain. Doors map it to their wire format; no HTTP here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class FieldError:
    """One problem in a request body or input, located by a path of keys and indices."""

    loc: tuple[str | int, ...]
    msg: str

    def as_dict(self) -> dict[str, Any]:
        return {"loc": list(self.loc), "msg": self.msg}


@dataclass
class DomainError(Exception):
    """Base of every expected failure. `kind` is the stable prefix of the contract."""

    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "InternalError"

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class InvalidRequest(DomainError):
    kind = "InvalidRequest"


class Unauthenticated(DomainError):
    kind = "Unauthenticated"


class PermissionDenied(DomainError):
    kind = "PermissionDenied"


class NotFound(DomainError):
    kind = "NotFound"


def found(thing: T | None, what: str) -> T:
    """`thing`, or NotFound saying there is no `what` (`f"package {ref!r}"`) when it is None:
    the one "get or raise NotFound" of the services."""
    if thing is None:
        raise NotFound(f"no {what}")
    return thing


class MethodNotAllowed(DomainError):
    kind = "MethodNotAllowed"


class NotAcceptable(DomainError):
    kind = "NotAcceptable"


class Conflict(DomainError):
    kind = "Conflict"


class PayloadTooLarge(DomainError):
    kind = "PayloadTooLarge"


class RateLimited(DomainError):
    kind = "RateLimited"


class QuotaExceeded(DomainError):
    """A per-user quota (contract 8b) is used up; `retry_after` in `extra` when waiting helps."""

    kind = "QuotaExceeded"


class Unavailable(DomainError):
    """A transient condition (a busy database, a broker that does not answer): retry later."""

    kind = "Unavailable"


class ValidationError(DomainError):
    kind = "ValidationError"

    def __init__(
        self,
        message: str,
        errors: Sequence[FieldError] = (),
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, dict(extra or {}))
        self.errors = list(errors)
