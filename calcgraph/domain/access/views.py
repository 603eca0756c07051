"""What the access service answers: plain data, serialised by each door. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from calcgraph.domain.access.principal import Identity


@dataclass(frozen=True)
class UserView(Identity):
    """A provisioned user: the identity its token asserted (kept on the user row, refreshed
    when the claims change), with the row's id and creation time."""

    id: str
    created_at: datetime


@dataclass(frozen=True)
class MemberView:
    username: str
    role: str


@dataclass(frozen=True)
class OrganizationView:
    id: str
    slug: str
    name: str
    created_at: datetime
    members: tuple[MemberView, ...]


@dataclass(frozen=True)
class OwnedView:
    """What a package's and a workflow's views share: who owns it and who may see it (the
    policy's `Owned`)."""

    visibility: str
    owner_id: str
    owner: str
    """The owner's username."""
    organization_id: str | None
    organization: str | None
    """The owning organization's slug."""
