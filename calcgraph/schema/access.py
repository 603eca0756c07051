"""GraphQL types of users and organizations, and the two helpers every field starts from
(`principal_of`, `loaders_of`).

Every nested field of the access-controlled types (here, `schema.packages`, `schema.jobs`)
goes through the per-request loaders, hence through the policy, with the rule of the matching
top-level lookup: a hidden object is `null` where the field is nullable (`NodeState.job`,
`NodeState.functionVersion`, `FunctionVersion.function`) and an error with `extensions.code`
`PermissionDenied` where it is not (`Job.package`, `Job.function`, `Function.package`,
`Package.organization`); lists leave hidden items out."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import strawberry

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.views import MemberView, OrganizationView, UserView
from calcgraph.domain.errors import Unauthenticated
from calcgraph.domain.quotas.views import UsageView
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Info
from calcgraph.schema.viewed import FromView, view_fields

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
@view_fields(
    {
        "id": "Identifier in calcgraph.",
        "username": "`preferred_username` of the token.",
        "email": "E-mail address, if the token has one.",
        "given_name": "Given name.",
        "family_name": "Family name.",
        "roles": "Realm roles: `user`, `admin`.",
        "created_at": "First sign-in.",
    },
)
class UserType(FromView[UserView]):
    @classmethod
    def from_view(cls, user: UserView) -> UserType:
        return cls.viewing(user, roles=list(user.roles))


@strawberry.enum(description="Role in an organization.")
class MemberRole(Enum):
    member = "member"
    owner = "owner"


@strawberry.type(name="Member", description="A member of an organization.")
@view_fields(
    {
        "username": "The member's username.",
        "role": "`owner` or `member`.",
    },
)
class MemberType(FromView[MemberView]):
    pass


@strawberry.type(name="Organization", description="An organization; readable by its members.")
@view_fields(
    {
        "id": "Identifier.",
        "slug": "Address of the organization.",
        "name": "Display name.",
        "created_at": "Creation time.",
        "members": "Members and their roles.",
    },
    members=list[MemberType],
)
class OrganizationType(FromView[OrganizationView]):
    @strawberry.field(description="The organization's packages that the caller may see.")
    async def packages(
        self, info: Info
    ) -> list[Annotated[PackageType, strawberry.lazy("calcgraph.schema.packages")]]:
        rows = await loaders_of(info).packages_by_organization_id.load(self.view.id)
        package_type = _PACKAGE_TYPE.resolve_type()
        return [package_type.from_view(p) for p in rows]

    @classmethod
    def from_view(cls, org: OrganizationView) -> OrganizationType:
        return cls.viewing(org, members=[MemberType.from_view(m) for m in org.members])


@strawberry.type(
    name="UserUsage", description="What one user holds now against the quotas (contract 8b)."
)
@view_fields(
    {
        "user_id": "Identifier in calcgraph.",
        "username": "`preferred_username` of the token.",
        "unfinished_runs": "Workflow runs not yet terminal.",
        "jobs": "Jobs kept.",
        "queued_jobs": "Jobs submitted and not yet started.",
        "stored_bytes": "Bytes of the jobs' inputs, outputs and logs (a Float: Int is 32 bits).",
        "largest_workflow_nodes": "Nodes of the largest workflow version of the workflows the "
        "user owns.",
    },
    stored_bytes=float,
)
class UserUsageType(FromView[UsageView]):
    @classmethod
    def from_view(cls, usage: UsageView) -> UserUsageType:
        return cls.viewing(usage, stored_bytes=float(usage.stored_bytes))
