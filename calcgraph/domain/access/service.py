"""Users and organizations: provisioning from token claims, membership management."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Literal, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access import policy
from calcgraph.domain.access.models import Membership, Organization, User
from calcgraph.domain.access.principal import Identity, Principal
from calcgraph.domain.access.repository import (
    ExecutionFacts,
    OrganizationRepository,
    UserRepository,
)
from calcgraph.domain.access.views import MemberView, OrganizationView, UserView
from calcgraph.domain.errors import (
    Conflict,
    FieldError,
    NotFound,
    PermissionDenied,
    ValidationError,
    found,
)
from calcgraph.domain.events.service import record
from calcgraph.domain.read_models import from_attributes

Demand = tuple[policy.Act, str]
"""An act the caller must be allowed, and what its refusal names (`policy.denial`)."""


class Owned(Protocol):
    """What the policy reads of a package or workflow (an ORM row or a view)."""

    @property
    def owner_id(self) -> str: ...
    @property
    def organization_id(self) -> str | None: ...
    @property
    def visibility(self) -> str: ...


OwnedT = TypeVar("OwnedT", bound=Owned)

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$")


def principal_of(user: User) -> Principal:
    return Principal(
        user_id=user.id,
        subject=user.subject,
        username=user.username,
        roles=frozenset(str(r) for r in user.roles),
    )


def user_view(user: User) -> UserView:
    return from_attributes(UserView, user, roles=tuple(str(r) for r in user.roles))


def _matches(user: User, identity: Identity) -> bool:
    return (
        user.username == identity.username
        and user.email == identity.email
        and user.given_name == identity.given_name
        and user.family_name == identity.family_name
        and list(user.roles) == list(identity.roles)
    )


class AccessService:
    async def require(
        self,
        session: AsyncSession,
        principal: Principal,
        *demands: Demand,
        on: Owned | None = None,
        organization_id: str | None = None,
        submitted_by: str | None = None,
    ) -> None:
        """Raise PermissionDenied for the first of `demands` the policy refuses, on current
        facts gathered once: `on` the package or workflow (of a job its package, of a run its
        workflow), `organization_id` for the organization acts, `submitted_by` for a job's or
        run's user. Whether the thing exists (NotFound) is the caller's to say first."""
        acts = [act for act, _ in demands]
        facts = await self._facts(session, principal, acts, on, organization_id, submitted_by)
        for act, refusal in demands:
            if not policy.decide(act, principal, facts):
                raise PermissionDenied(policy.denial(refusal))

    def allowed_without_reads(
        self, principal: Principal, act: policy.Act, on: Owned, submitted_by: str | None = None
    ) -> bool:
        """Whether the policy allows `act` on these facts when the caller's role cannot change
        the verdict (then `require` reads nothing either); False when it could (the caller's
        role in the owning organization counts: only `require` decides, reading it)."""
        thing = policy.PackageFacts(on.owner_id, on.organization_id, on.visibility)
        facts = policy.Facts(None, thing, submitted_by)
        if thing.organization_id is not None and policy.role_matters(act, principal, facts):
            return False
        return policy.decide(act, principal, facts)

    async def visible(
        self,
        session: AsyncSession,
        principal: Principal,
        thing: OwnedT | None,
        kind: Literal["package", "workflow"],
        name: str,
    ) -> OwnedT:
        """`thing`, the package or workflow the caller named `name`: NotFound when there is
        none, PermissionDenied when it is hidden from the caller (the specification asks for
        403 there, not 404)."""
        owned = found(thing, f"{kind} {name!r}")
        act: policy.Act = "see_package" if kind == "package" else "see_workflow"
        refusal = f"{kind} {name!r}: it is not visible to you"
        await self.require(session, principal, (act, refusal), on=owned)
        return owned

    async def _facts(
        self,
        session: AsyncSession,
        principal: Principal,
        acts: Sequence[policy.Act],
        on: Owned | None,
        organization_id: str | None,
        submitted_by: str | None,
    ) -> policy.Facts:
        thing = (
            None
            if on is None
            else policy.PackageFacts(on.owner_id, on.organization_id, on.visibility)
        )
        facts = policy.Facts(None, thing, submitted_by)
        if organization_id is None and thing is not None:
            organization_id = thing.organization_id
        if organization_id is None or not any(
            policy.role_matters(act, principal, facts) for act in acts
        ):
            return facts
        role = await OrganizationRepository.from_session(session).role_of(
            organization_id, principal.user_id
        )
        return policy.Facts(role, thing, submitted_by)

    async def provision(self, session: AsyncSession, identity: Identity) -> Principal:
        """The user of a verified identity: created on first sight, updated when the
        identity provider's claims changed since, untouched (no write) otherwise."""
        users = UserRepository.from_session(session)
        user = await users.get_by_subject(identity.subject)
        if user is not None and _matches(user, identity):
            return principal_of(user)
        if user is None or user.username != identity.username:
            holder = await users.get_by_username(identity.username)
            if holder is not None and holder.subject != identity.subject:
                raise Conflict(
                    f"the username {identity.username!r} belongs to another identity of this "
                    "service; ask an administrator"
                )
        if user is None:
            user = await users.add(User(subject=identity.subject, username=identity.username))
        user.username = identity.username
        user.email = identity.email
        user.given_name = identity.given_name
        user.family_name = identity.family_name
        user.roles = list(identity.roles)
        await session.flush()
        return principal_of(user)

    async def me(self, session: AsyncSession, principal: Principal) -> UserView:
        user = await UserRepository.from_session(session).get(principal.user_id)
        if user is None:
            raise NotFound("your user record no longer exists")
        return user_view(user)

    async def signed_in(self, session: AsyncSession, principal: Principal) -> UserView:
        """The user an exchanged sign-in code belongs to, and the specification's UserLogin
        event (`calcgraph.user.login`) in the same unit of work."""
        user = await self.me(session, principal)
        await record(session, "calcgraph.user.login", user.id, {"username": user.username})
        return user

    async def _organization(self, session: AsyncSession, slug: str) -> Organization:
        org = found(
            await OrganizationRepository.from_session(session).get_by_slug(slug),
            f"organization {slug!r}",
        )
        return org

    async def _view(self, session: AsyncSession, org: Organization) -> OrganizationView:
        members = await OrganizationRepository.from_session(session).members([org.id])
        return OrganizationView(
            id=org.id,
            slug=org.slug,
            name=org.name,
            created_at=org.created_at,
            members=tuple(MemberView(username=u, role=r) for _, u, r in members),
        )

    async def create_organization(
        self, session: AsyncSession, principal: Principal, slug: str, name: str
    ) -> OrganizationView:
        if not _SLUG.match(slug):
            raise ValidationError(
                f"invalid organization slug {slug!r}",
                [FieldError(("body", "slug"), "lowercase letters, digits and inner dashes")],
            )
        orgs = OrganizationRepository.from_session(session)
        if await orgs.get_by_slug(slug) is not None:
            raise Conflict(f"an organization {slug!r} already exists")
        org = await orgs.add(Organization(slug=slug, name=name))
        await orgs.add_membership(
            Membership(organization_id=org.id, user_id=principal.user_id, role="owner")
        )
        return await self._view(session, org)

    async def get_organization(
        self, session: AsyncSession, principal: Principal, slug: str
    ) -> OrganizationView:
        org = await self._organization(session, slug)
        refusal = f"organization {slug!r}: you are not a member"
        await self.require(
            session, principal, ("read_organization", refusal), organization_id=org.id
        )
        return await self._view(session, org)

    async def add_member(
        self, session: AsyncSession, principal: Principal, slug: str, username: str, role: str
    ) -> MemberView:
        if role not in policy.ORG_ROLES:
            raise ValidationError(
                f"role must be one of {', '.join(policy.ORG_ROLES)}",
                [FieldError(("body", "role"), "member or owner")],
            )
        org = await self._organization(session, slug)
        refusal = f"the members of {slug!r}: only its owners and admins may"
        await self.require(session, principal, ("manage_members", refusal), organization_id=org.id)
        orgs = OrganizationRepository.from_session(session)
        user = found(
            await UserRepository.from_session(session).get_by_username(username),
            f"user {username!r}; a user exists after their first sign-in",
        )
        membership = await orgs.get_membership(org.id, user.id)
        if membership is None:
            await orgs.add_membership(
                Membership(organization_id=org.id, user_id=user.id, role=role)
            )
        elif membership.role != role:
            await self._keep_an_owner(orgs, org, membership.role, role)
            membership.role = role
            await session.flush()
        return MemberView(username=user.username, role=role)

    async def remove_member(
        self, session: AsyncSession, principal: Principal, slug: str, username: str
    ) -> None:
        org = await self._organization(session, slug)
        orgs = OrganizationRepository.from_session(session)
        user = await UserRepository.from_session(session).get_by_username(username)
        caller_role = await orgs.role_of(org.id, principal.user_id)
        target_id = user.id if user is not None else ""
        if not policy.can_remove_member(principal, caller_role, target_id):
            raise PermissionDenied(
                policy.denial(f"the members of {slug!r}: only its owners and admins may")
            )
        membership = await orgs.get_membership(org.id, target_id) if user else None
        if membership is None:
            raise NotFound(f"{username!r} is not a member of {slug!r}")
        await self._keep_an_owner(orgs, org, membership.role, None)
        await orgs.remove_membership(org.id, target_id)

    async def _keep_an_owner(
        self, orgs: OrganizationRepository, org: Organization, old: str, new: str | None
    ) -> None:
        # An organization without an owner could only be managed by admins again.
        if old == "owner" and new != "owner" and await orgs.count_owners(org.id) <= 1:
            raise Conflict(f"{org.slug!r} must keep at least one owner")

    async def organization_to_place_in(
        self, session: AsyncSession, principal: Principal, slug: str | None, what: str = ""
    ) -> Organization | None:
        """The organization a caller puts a package, workflow or function into: members only
        (admins anywhere); None when no organization is named. `what` completes the refusal."""
        if slug is None:
            return None
        organization = await self._organization(session, slug)
        refusal = f"organization {slug!r}: only its members {what}".rstrip()
        await self.require(
            session,
            principal,
            ("publish_into_organization", refusal),
            organization_id=organization.id,
        )
        return organization

    async def refused_executions(
        self, session: AsyncSession, user_id: str, function_version_ids: Collection[str]
    ) -> frozenset[str]:
        """The function versions among `function_version_ids` that user `user_id` may not
        execute now (`policy.can_execute` against current visibility, membership and roles),
        in one statement; nothing to check, no statement. Acts done on a user's behalf after
        their request (a tick's submissions, a chain's next nodes) ask this just before."""
        refused, _ = await self.execution_rights(session, user_id, function_version_ids)
        return refused

    async def execution_rights(
        self,
        session: AsyncSession,
        user_id: str,
        function_version_ids: Collection[str],
        *,
        queued_jobs: bool = False,
    ) -> tuple[frozenset[str], int | None]:
        """`refused_executions`, and with `queued_jobs` the user's queued jobs counted in the
        same statement (None: not counted, when no version was asked or found)."""
        wanted = set(function_version_ids)
        if not wanted:
            return frozenset(), None
        facts, queued = await UserRepository.from_session(session).execution_facts(
            user_id, wanted, queued_jobs=queued_jobs
        )
        return self.refused_by_facts(user_id, wanted, facts), queued

    def refused_by_facts(
        self, user_id: str, wanted: Collection[str], facts: Iterable[ExecutionFacts]
    ) -> frozenset[str]:
        """`refused_executions` decided on facts read already (a worker's claim reads them
        in its UPDATE's statement): a version without facts is refused."""
        allowed: set[str] = set()
        for fact in facts:
            if fact.user is None:
                continue  # the user is gone: nothing runs on their behalf
            subject, username, roles = fact.user
            principal = Principal(user_id, subject, username, frozenset(str(r) for r in roles))
            package = policy.PackageFacts(fact.owner_id, fact.organization_id, fact.visibility)
            if policy.can_execute(principal, package, fact.member_of_owning_org):
                allowed.add(fact.function_version_id)
        return frozenset(set(wanted) - allowed)

    async def readable_organizations(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, OrganizationView]:
        """The organizations among `ids` the caller may read, with members (for loaders)."""
        orgs = OrganizationRepository.from_session(session)
        roles = await orgs.roles_of(principal.user_id)
        readable = [i for i in ids if policy.can_read_organization(principal, roles.get(i))]
        found = await orgs.get_many(readable)
        members = await orgs.members([o.id for o in found])
        by_org: dict[str, list[MemberView]] = {o.id: [] for o in found}
        for org_id, username, role in members:
            by_org[org_id].append(MemberView(username=username, role=role))
        return {
            o.id: OrganizationView(
                id=o.id,
                slug=o.slug,
                name=o.name,
                created_at=o.created_at,
                members=tuple(by_org[o.id]),
            )
            for o in found
        }


access_service = AccessService()
