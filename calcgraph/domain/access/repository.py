"""All SQL of users, organizations and memberships, and the visibility rule as a WHERE clause."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    SQLColumnExpression,
    Table,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    true,
)

from calcgraph.db.base import RepositoryBase
from calcgraph.domain.access.models import Membership, Organization, User
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages.models import Package


def visible_clause_on(
    principal: Principal,
    owner_id: SQLColumnExpression[str],
    visibility: SQLColumnExpression[str],
    organization_id: SQLColumnExpression[str | None],
) -> ColumnElement[bool]:
    """`policy.can_see_package` (and `can_see_workflow`, the same rule) as SQL on the columns of
    an owned thing, so hidden rows never load. Membership is read in the same statement, which
    is what makes a departure from an organization take effect at once."""
    if principal.is_admin:
        return true()
    return visible_to(principal.user_id, owner_id, visibility, organization_id)


def visible_to(
    user_id: str | ColumnElement[str],
    owner_id: SQLColumnExpression[str],
    visibility: SQLColumnExpression[str],
    organization_id: SQLColumnExpression[str | None],
) -> ColumnElement[bool]:
    """`visible_clause_on` for a user who is not an admin; `user_id` may be a bound parameter
    (a clause built once, its user given at each execution)."""
    member_orgs = select(Membership.organization_id).where(Membership.user_id == user_id)
    return or_(
        owner_id == user_id,
        visibility == "public",
        and_(visibility == "internal", organization_id.in_(member_orgs)),
    )


# Built once: every tick that submits asks it, and building it cost more than running it.
# Table columns, not the models': the session runs them as Core (a model's attribute alone
# makes a statement ORM-enabled), the tick's and a worker's claim's alike.
_USERS = cast(Table, User.__table__)
_MEMBERSHIPS = cast(Table, Membership.__table__)
_PACKAGES = cast(Table, Package.__table__)
_FUNCTIONS = cast(Table, Function.__table__)
_VERSIONS = cast(Table, FunctionVersion.__table__)
_JOBS = cast(Table, Job.__table__)
_OWNER_FACTS = (_USERS.c.subject, _USERS.c.username, _USERS.c.roles)
_OWNER = select(*_OWNER_FACTS).where(_USERS.c.id == bindparam("user_id")).subquery()
_PACKAGE_FACTS = (
    _VERSIONS.c.id,
    _PACKAGES.c.owner_id,
    _PACKAGES.c.organization_id,
    _PACKAGES.c.visibility,
    _MEMBERSHIPS.c.role,
)
"""The execution facts' package columns, the user's columns after them (both statements)."""


def _membership_of(user_id: ColumnElement[str]) -> ColumnElement[bool]:
    """The join of `user_id`'s membership in the package's owning organization."""
    return and_(
        _MEMBERSHIPS.c.organization_id == _PACKAGES.c.organization_id,
        _MEMBERSHIPS.c.user_id == user_id,
    )


_EXECUTION_FACTS = (
    select(*_PACKAGE_FACTS, *_OWNER.c)
    .select_from(_VERSIONS)
    .join(_FUNCTIONS, _FUNCTIONS.c.id == _VERSIONS.c.function_id)
    .join(_PACKAGES, _PACKAGES.c.id == _FUNCTIONS.c.package_id)
    .outerjoin(_MEMBERSHIPS, _membership_of(bindparam("user_id")))
    .outerjoin(_OWNER, true())
    .where(_VERSIONS.c.id.in_(bindparam("version_ids", expanding=True)))
)

# The user's queued jobs beside the facts, for a tick that submits (its quota room, contract
# 8b): one statement, not a count of its own. Uncorrelated: counted once, by the jobs' index.
_EXECUTION_FACTS_AND_QUEUED = _EXECUTION_FACTS.add_columns(
    select(func.count())
    .where(_JOBS.c.user_id == bindparam("user_id"), _JOBS.c.status == "queued")
    .scalar_subquery()
)


def with_execution_facts(
    query: Select[Any], version_id: ColumnElement[str], user_id: ColumnElement[str]
) -> Select[Any]:
    """`query` with `EXECUTION_FACTS_COLUMNS` added for each of its rows, by outer joins: the
    package facts of the function version `version_id`, and the membership in its owning
    organization and the roles of the user `user_id` (their columns NULL when missing); what
    a worker's claim asks of each job's owner in its own statement (`execution_facts_of`)."""
    return (
        query.add_columns(*_PACKAGE_FACTS, *_OWNER_FACTS)
        .outerjoin(_VERSIONS, _VERSIONS.c.id == version_id)
        .outerjoin(_FUNCTIONS, _FUNCTIONS.c.id == _VERSIONS.c.function_id)
        .outerjoin(_PACKAGES, _PACKAGES.c.id == _FUNCTIONS.c.package_id)
        .outerjoin(_MEMBERSHIPS, _membership_of(user_id))
        .outerjoin(_USERS, _USERS.c.id == user_id)
    )


EXECUTION_FACTS_COLUMNS = len(_PACKAGE_FACTS) + len(_OWNER_FACTS)
"""How many columns `with_execution_facts` adds (the last of its rows)."""


@dataclass(frozen=True)
class ExecutionFacts:
    """What the policy needs to decide whether a user may execute a function version now."""

    function_version_id: str
    owner_id: str
    organization_id: str | None
    visibility: str
    member_of_owning_org: bool
    user: tuple[str, str, list[Any]] | None
    """(subject, username, roles) of the user; None when the user row is gone."""


def execution_facts_of(row: Sequence[Any]) -> ExecutionFacts | None:
    """The facts in the first `EXECUTION_FACTS_COLUMNS` columns of `row` (None: no such
    function version)."""
    if row[0] is None or row[1] is None:
        return None
    return ExecutionFacts(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4] is not None,
        None if row[5] is None else (row[5], row[6], list(row[7] or [])),
    )


class UserRepository(RepositoryBase[User]):
    model = User

    async def get_by_subject(self, subject: str) -> User | None:
        return await self.session.scalar(select(User).where(User.subject == subject))

    async def get_by_username(self, username: str) -> User | None:
        return await self.session.scalar(select(User).where(User.username == username))

    async def get_many(self, ids: Sequence[str]) -> list[User]:
        if not ids:
            return []
        return list(await self.session.scalars(select(User).where(User.id.in_(ids))))

    async def execution_facts(
        self, user_id: str, version_ids: Collection[str], *, queued_jobs: bool = False
    ) -> tuple[list[ExecutionFacts], int | None]:
        """The package facts of each function version among `version_ids` (missing ones are
        absent), the user's membership in its owning organization and the user's roles, in
        one statement: what a tick checks for the nodes it is about to submit. With
        `queued_jobs`, the user's queued jobs counted in the same statement (None when no
        version was found, or without it)."""
        if not version_ids:
            return [], None
        rows = (
            await self.session.execute(
                _EXECUTION_FACTS_AND_QUEUED if queued_jobs else _EXECUTION_FACTS,
                {"user_id": user_id, "version_ids": sorted(version_ids)},
            )
        ).all()
        facts = [fact for fact in map(execution_facts_of, rows) if fact is not None]
        return facts, int(rows[0][EXECUTION_FACTS_COLUMNS]) if queued_jobs and rows else None


class OrganizationRepository(RepositoryBase[Organization]):
    model = Organization

    async def get_by_slug(self, slug: str) -> Organization | None:
        return await self.session.scalar(select(Organization).where(Organization.slug == slug))

    async def get_many(self, ids: Sequence[str]) -> list[Organization]:
        if not ids:
            return []
        return await self.all_where(Organization.id.in_(ids))

    async def role_of(self, organization_id: str, user_id: str) -> str | None:
        return await self.session.scalar(
            select(Membership.role).where(
                Membership.organization_id == organization_id, Membership.user_id == user_id
            )
        )

    async def members(self, organization_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        """(organization id, username, role) of every member, in username order."""
        if not organization_ids:
            return []
        rows = await self.session.execute(
            select(Membership.organization_id, User.username, Membership.role)
            .join(User, User.id == Membership.user_id)
            .where(Membership.organization_id.in_(organization_ids))
            .order_by(User.username)
        )
        return [(org_id, username, role) for org_id, username, role in rows]

    async def get_membership(self, organization_id: str, user_id: str) -> Membership | None:
        return await self.session.get(Membership, (organization_id, user_id))

    async def add_membership(self, membership: Membership) -> Membership:
        self.session.add(membership)
        await self.session.flush()
        return membership

    async def remove_membership(self, organization_id: str, user_id: str) -> None:
        await self.session.execute(
            delete(Membership).where(
                Membership.organization_id == organization_id, Membership.user_id == user_id
            )
        )

    async def count_owners(self, organization_id: str) -> int:
        count = await self.session.scalar(
            select(func.count())
            .select_from(Membership)
            .where(Membership.organization_id == organization_id, Membership.role == "owner")
        )
        return int(count or 0)

    async def roles_of(self, user_id: str) -> dict[str, str]:
        """Organization id to the user's role there, for every membership of the user."""
        rows = await self.session.execute(
            select(Membership.organization_id, Membership.role).where(Membership.user_id == user_id)
        )
        return {org_id: role for org_id, role in rows}
