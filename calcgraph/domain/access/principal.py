"""Who is calling: the identity a verified token asserts, and the provisioned principal."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calcgraph.domain.errors import Unauthenticated

ADMIN_ROLE = "admin"
DEFAULT_ROLE = "user"


def _optional_str(claims: Mapping[str, Any], name: str) -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Identity:
    """The claims calcgraph uses, taken from a token that has already been verified."""

    subject: str
    username: str
    email: str | None
    given_name: str | None
    family_name: str | None
    roles: tuple[str, ...]

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> Identity:
        subject = _optional_str(claims, "sub")
        if subject is None:
            raise Unauthenticated("the token has no subject")
        realm_access = claims.get("realm_access")
        raw_roles = realm_access.get("roles") if isinstance(realm_access, Mapping) else None
        roles = (
            sorted({r for r in raw_roles if isinstance(r, str)})
            if isinstance(raw_roles, list)
            else []
        )
        # The specification gives every newly registered user the role `user`; a provider
        # that sends no realm roles at all still yields that default.
        if not roles:
            roles = [DEFAULT_ROLE]
        return cls(
            subject=subject,
            username=_optional_str(claims, "preferred_username") or subject,
            email=_optional_str(claims, "email"),
            given_name=_optional_str(claims, "given_name"),
            family_name=_optional_str(claims, "family_name"),
            roles=tuple(roles),
        )


@dataclass(frozen=True)
class Principal:
    """An authenticated caller with its user row: what every service takes."""

    user_id: str
    subject: str
    username: str
    roles: frozenset[str]
    expires_at: float | None = field(default=None, compare=False)
    """When the token that names this caller stops being accepted (Unix seconds, its `exp`
    plus the verifier's leeway); None for a principal no token carries (workers, tests)."""

    @property
    def is_admin(self) -> bool:
        return ADMIN_ROLE in self.roles

    def seconds_left(self, now: float | None = None) -> float | None:
        """Seconds until the token expires (0 or less: expired); None when it never does."""
        if self.expires_at is None:
            return None
        return self.expires_at - (time.time() if now is None else now)

    def require_current(self) -> None:
        """Contract 8b: no operation runs on an expired token, on any door (a socket or a
        subscription authenticated once lives past its token)."""
        left = self.seconds_left()
        if left is not None and left <= 0:
            raise Unauthenticated("the token has expired; sign in again")
