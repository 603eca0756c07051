"""GraphQL types of users and organizations, and the two helpers every field starts from
(`principal_of`, `loaders_of`).

Every nested field of the access-controlled types (here, `schema.packages`, `schema.jobs`)
goes through the per-request loaders, hence through the policy, with the rule of the matching
top-level lookup: a hidden object is `null` where the field is nullable (`NodeState.job`,
`NodeState.functionVersion`, `FunctionVersion.function`) and an error with `extensions.code`
`PermissionDenied` where it is not (`Job.package`, `Job.function`, `Function.package`,
`Package.organization`); lists leave hidden items out."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import strawberry

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.views import MemberView, OrganizationView, UserView
from calcgraph.domain.errors import Unauthenticated
from calcgraph.domain.quotas.views import UsageView
from calcgraph.domain.read_models import from_attributes
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Info
from calcgraph.schema.viewed import FromView

if TYPE_CHECKING:
    from calcgraph.schema.packages import PackageType

# Organization.packages and Package.organization point at each other: schema.packages builds
# on this module, so this one edge is resolved when first used (strawberry's lazy types).
_PACKAGE_TYPE: strawberry.LazyType[str, str] = strawberry.LazyType(
    "PackageType", "calcgraph.schema.packages"
)


def principal_of(info: Info) -> Principal:
    principal = info.context.principal
    if principal is None:
        raise Unauthenticated("this field needs a bearer token: Authorization: Bearer <token>")
    return principal


def loaders_of(info: Info) -> AccessLoaders:
    principal_of(info)
    loaders = info.context.access_loaders
    assert loaders is not None  # built by the view whenever there is a principal
    return loaders


@strawberry.type(name="User", description="An authenticated user, provisioned from its token.")
class UserType:
    id: str = strawberry.field(description="Identifier in calcgraph.")
    username: str = strawberry.field(description="`preferred_username` of the token.")
    email: str | None = strawberry.field(description="E-mail address, if the token has one.")
    given_name: str | None = strawberry.field(description="Given name.")
    family_name: str | None = strawberry.field(description="Family name.")
    roles: list[str] = strawberry.field(description="Realm roles: `user`, `admin`.")
    created_at: datetime = strawberry.field(description="First sign-in.")

    @classmethod
    def from_view(cls, user: UserView) -> UserType:
        return from_attributes(cls, user, roles=list(user.roles))


@strawberry.enum(description="Role in an organization.")
class MemberRole(Enum):
    member = "member"
    owner = "owner"


@strawberry.type(name="Member", description="A member of an organization.")
class MemberType(FromView[MemberView]):
    username: str = strawberry.field(description="The member's username.")
    role: str = strawberry.field(description="`owner` or `member`.")


@strawberry.type(name="Organization", description="An organization; readable by its members.")
class OrganizationType:
    id: str = strawberry.field(description="Identifier.")
    slug: str = strawberry.field(description="Address of the organization.")
    name: str = strawberry.field(description="Display name.")
    created_at: datetime = strawberry.field(description="Creation time.")
    members: list[MemberType] = strawberry.field(description="Members and their roles.")

    @strawberry.field(description="The organization's packages that the caller may see.")
    async def packages(
        self, info: Info
    ) -> list[Annotated[PackageType, strawberry.lazy("calcgraph.schema.packages")]]:
        rows = await loaders_of(info).packages_by_organization_id.load(self.id)
        package_type = _PACKAGE_TYPE.resolve_type()
        return [package_type.from_view(p) for p in rows]

    @classmethod
    def from_view(cls, org: OrganizationView) -> OrganizationType:
        return from_attributes(cls, org, members=[MemberType.from_view(m) for m in org.members])


@strawberry.type(
    name="UserUsage", description="What one user holds now against the quotas (contract 8b)."
)
class UserUsageType:
    user_id: str = strawberry.field(description="Identifier in calcgraph.")
    username: str = strawberry.field(description="`preferred_username` of the token.")
    unfinished_runs: int = strawberry.field(description="Workflow runs not yet terminal.")
    jobs: int = strawberry.field(description="Jobs kept.")
    queued_jobs: int = strawberry.field(description="Jobs submitted and not yet started.")
    stored_bytes: float = strawberry.field(
        description="Bytes of the jobs' inputs, outputs and logs (a Float: Int is 32 bits)."
    )
    largest_workflow_nodes: int = strawberry.field(
        description="Nodes of the largest workflow version of the workflows the user owns."
    )

    @classmethod
    def from_view(cls, usage: UsageView) -> UserUsageType:
        return from_attributes(cls, usage, stored_bytes=float(usage.stored_bytes))
