"""The access policy, decided here and only here. Pure: facts in, verdicts out.

Repositories express the same rules in SQL for listings (`packages.repository.visible_clause`,
`jobs.repository`); the authorization matrix test checks that both agree cell by cell. Services
ask by act (`decide`) through `access_service.require`, which gathers the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never

from calcgraph.domain.access.principal import Principal

Visibility = Literal["private", "internal", "public"]
VISIBILITIES: tuple[Visibility, ...] = ("private", "internal", "public")
OrgRole = Literal["owner", "member"]
ORG_ROLES: tuple[OrgRole, ...] = ("owner", "member")


@dataclass(frozen=True)
class PackageFacts:
    owner_id: str
    organization_id: str | None
    visibility: str


def can_see_package(
    principal: Principal, package: PackageFacts, member_of_owning_org: bool
) -> bool:
    """private: its owner; internal: the owner and members of the owning organization;
    public: every authenticated caller. Admins read everything."""
    if principal.is_admin or package.owner_id == principal.user_id:
        return True
    if package.visibility == "public":
        return True
    if package.visibility == "internal":
        return package.organization_id is not None and member_of_owning_org
    return False


def can_execute(principal: Principal, package: PackageFacts, member_of_owning_org: bool) -> bool:
    """Execute a function version of `package`: whoever may see the package, decided against
    current state at every act: the execute request (for its caller), and every act done on
    a caller's behalf later (a tick submitting a run's node, a chain worker going on to its
    next node, for the run's owner). A run started while its owner could see a function
    stops at that function once the package goes private or the owner leaves its
    organization."""
    return can_see_package(principal, package, member_of_owning_org)


def can_see_job(principal: Principal, job_user_id: str, package_visible: bool) -> bool:
    """A job is its submitter's (admins read all), and only while its package stays visible:
    access follows the current visibility and membership, not those at submission time."""
    if principal.is_admin:
        return True
    return job_user_id == principal.user_id and package_visible


def can_read_organization(principal: Principal, role: str | None) -> bool:
    return principal.is_admin or role is not None


def can_manage_members(principal: Principal, role: str | None) -> bool:
    return principal.is_admin or role == "owner"


def can_remove_member(principal: Principal, role: str | None, target_user_id: str) -> bool:
    # Leaving an organization is always allowed; removing someone else is management.
    return (
        target_user_id == principal.user_id
        and role is not None
        or can_manage_members(principal, role)
    )


def denial(what: str) -> str:
    """The human part of a PermissionDenied message; never says whether a hidden thing exists
    beyond what the identifier in the request already says."""
    return f"you may not access {what}"


def can_manage_package(principal: Principal, package: PackageFacts, org_role: str | None) -> bool:
    """Publish a new version, change visibility: the owner, owners of the owning
    organization, admins. Members of the organization read but do not manage."""
    if principal.is_admin or package.owner_id == principal.user_id:
        return True
    return package.organization_id is not None and org_role == "owner"


def can_publish_into_organization(principal: Principal, role: str | None) -> bool:
    """Any member may place a package in their organization (its owners then manage it too)."""
    return principal.is_admin or role is not None


def can_see_workflow(
    principal: Principal, workflow: PackageFacts, member_of_owning_org: bool
) -> bool:
    """Workflows carry visibility like packages, with the same rule."""
    return can_see_package(principal, workflow, member_of_owning_org)


def can_manage_workflow(principal: Principal, workflow: PackageFacts, org_role: str | None) -> bool:
    """Save a new version: as for packages, the owner, owning-organization owners, admins."""
    return can_manage_package(principal, workflow, org_role)


def can_see_run(principal: Principal, run_user_id: str, workflow_visible: bool) -> bool:
    """A run is its creator's (admins read all), while its workflow stays visible to them:
    the same rule as jobs, which a run's nodes are."""
    return can_see_job(principal, run_user_id, workflow_visible)


Act = Literal[
    "see_package",
    "manage_package",
    "see_workflow",
    "manage_workflow",
    "see_job",
    "see_run",
    "read_organization",
    "manage_members",
    "publish_into_organization",
]
ORGANIZATION_ACTS: frozenset[Act] = frozenset(
    {"read_organization", "manage_members", "publish_into_organization"}
)


@dataclass(frozen=True)
class Facts:
    """What a verdict reads besides the caller."""

    role: str | None = None
    """The caller's role in the organization concerned: the one acted on, or the owning
    organization of the package or workflow."""
    thing: PackageFacts | None = None
    """The package or workflow acted on; of a job its package, of a run its workflow (None:
    gone)."""
    submitted_by: str | None = None
    """The user who submitted the job or started the run."""


def decide(act: Act, principal: Principal, facts: Facts) -> bool:
    """Every act by name, on the rules above."""
    role, thing = facts.role, facts.thing
    member = role is not None
    if act == "read_organization":
        return can_read_organization(principal, role)
    if act == "manage_members":
        return can_manage_members(principal, role)
    if act == "publish_into_organization":
        return can_publish_into_organization(principal, role)
    if act == "see_job":
        visible = thing is not None and can_see_package(principal, thing, member)
        return can_see_job(principal, facts.submitted_by or "", visible)
    if act == "see_run":
        visible = thing is not None and can_see_workflow(principal, thing, member)
        return can_see_run(principal, facts.submitted_by or "", visible)
    if thing is None:
        return False
    if act == "see_package":
        return can_see_package(principal, thing, member)
    if act == "manage_package":
        return can_manage_package(principal, thing, role)
    if act == "see_workflow":
        return can_see_workflow(principal, thing, member)
    if act == "manage_workflow":
        return can_manage_workflow(principal, thing, role)
    assert_never(act)


def role_matters(act: Act, principal: Principal, facts: Facts) -> bool:
    """Whether the caller's role can change `decide`'s verdict on these facts: when it cannot,
    the statement that reads it is spared (every execute and every run read asks)."""
    if principal.is_admin:
        return False
    if act in ORGANIZATION_ACTS:
        return True
    thing = facts.thing
    if thing is None or thing.organization_id is None or thing.owner_id == principal.user_id:
        return False
    if act in ("see_job", "see_run") and facts.submitted_by != principal.user_id:
        return False
    if act in ("manage_package", "manage_workflow"):
        return True
    return thing.visibility == "internal"
