"""GraphQL types of users, organizations, packages, functions and jobs. Every nested field
that reaches one of these goes through the per-request loaders, hence through the policy,
with the rule of the matching top-level lookup: a hidden object is `null` where the field is
nullable (`NodeState.job`, `NodeState.functionVersion`, `FunctionVersion.function`) and an
error with `extensions.code` `PermissionDenied` where it is not (`Job.package`,
`Job.function`, `Function.package`, `Package.organization`); lists leave hidden items out."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.views import MemberView, OrganizationView, UserView
from calcgraph.domain.errors import PermissionDenied, Unauthenticated
from calcgraph.domain.functions.views import FunctionView
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.packages.views import PackageView
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.context import Info

if TYPE_CHECKING:
    from calcgraph.schema.packages import FunctionVersionType, PackageVersionType


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
        return cls(
            id=user.id,
            username=user.username,
            email=user.email,
            given_name=user.given_name,
            family_name=user.family_name,
            roles=list(user.roles),
            created_at=user.created_at,
        )


@strawberry.enum(description="Role in an organization.")
class MemberRole(Enum):
    member = "member"
    owner = "owner"


@strawberry.type(name="Member", description="A member of an organization.")
class MemberType:
    username: str = strawberry.field(description="The member's username.")
    role: str = strawberry.field(description="`owner` or `member`.")

    @classmethod
    def from_view(cls, member: MemberView) -> MemberType:
        return cls(username=member.username, role=member.role)


@strawberry.type(name="Organization", description="An organization; readable by its members.")
class OrganizationType:
    id: str = strawberry.field(description="Identifier.")
    slug: str = strawberry.field(description="Address of the organization.")
    name: str = strawberry.field(description="Display name.")
    created_at: datetime = strawberry.field(description="Creation time.")
    members: list[MemberType] = strawberry.field(description="Members and their roles.")

    @strawberry.field(description="The organization's packages that the caller may see.")
    async def packages(self, info: Info) -> list[PackageType]:
        rows = await loaders_of(info).packages_by_organization_id.load(self.id)
        return [PackageType.from_view(p) for p in rows]

    @classmethod
    def from_view(cls, org: OrganizationView) -> OrganizationType:
        return cls(
            id=org.id,
            slug=org.slug,
            name=org.name,
            created_at=org.created_at,
            members=[MemberType.from_view(m) for m in org.members],
        )


@strawberry.type(name="Package", description="A package of functions.")
class PackageType:
    id: str = strawberry.field(description="Identifier.")
    name: str = strawberry.field(description="Unique package name.")
    visibility: str = strawberry.field(description="`private`, `internal` or `public`.")
    owner: str = strawberry.field(description="Username of the owner.")
    organization_slug: str | None = strawberry.field(description="Owning organization's slug.")
    description: str | None = strawberry.field(description="What the package does.")
    current_version: str | None = strawberry.field(description="Latest deployed version.")
    created_at: datetime = strawberry.field(description="Creation time.")
    updated_at: datetime = strawberry.field(description="Last change.")
    organization_id: strawberry.Private[str | None]

    @strawberry.field(description="Functions of the package.")
    async def functions(self, info: Info) -> list[FunctionType]:
        rows = await loaders_of(info).functions_by_package_id.load(self.id)
        return [FunctionType.from_view(f) for f in rows]

    @strawberry.field(description="Every deployment of the package, oldest first.")
    async def versions(
        self, info: Info
    ) -> list[Annotated[PackageVersionType, strawberry.lazy("calcgraph.schema.packages")]]:
        # Imported here: calcgraph.schema.packages builds on the types of this module.
        from calcgraph.schema.packages import versions_of_package

        return await versions_of_package(info, self.id)

    @strawberry.field(description="The owning organization; PermissionDenied for non-members.")
    async def organization(self, info: Info) -> OrganizationType | None:
        if self.organization_id is None:
            return None
        org = await loaders_of(info).organization_by_id.load(self.organization_id)
        if org is None:
            raise PermissionDenied(
                f"you may not access organization {self.organization_slug!r}: you are not a member"
            )
        return OrganizationType.from_view(org)

    @classmethod
    def from_view(cls, package: PackageView) -> PackageType:
        return cls(
            id=package.id,
            name=package.name,
            visibility=package.visibility,
            owner=package.owner,
            organization_slug=package.organization,
            description=package.description,
            current_version=package.current_version,
            created_at=package.created_at,
            updated_at=package.updated_at,
            organization_id=package.organization_id,
        )


async def _package(info: Info, package_id: str) -> PackageType:
    package = await loaders_of(info).package_by_id.load(package_id)
    if package is None:
        raise PermissionDenied(f"you may not access package {package_id!r}")
    return PackageType.from_view(package)


@strawberry.type(name="Function", description="A function of a package.")
class FunctionType:
    id: str = strawberry.field(description="Immutable identifier.")
    name: str = strawberry.field(description="Name within its package.")
    package_id: str = strawberry.field(description="Identifier of its package.")
    current_version: str | None = strawberry.field(description="Current version.")
    current_version_id: str | None = strawberry.field(description="Current version's id.")
    created_at: datetime = strawberry.field(description="Creation time.")

    @strawberry.field(description="The package of the function.")
    async def package(self, info: Info) -> PackageType:
        return await _package(info, self.package_id)

    @strawberry.field(description="Every version of the function, oldest first.")
    async def versions(
        self, info: Info
    ) -> list[Annotated[FunctionVersionType, strawberry.lazy("calcgraph.schema.packages")]]:
        # Imported here: calcgraph.schema.packages builds on the types of this module.
        from calcgraph.schema.packages import versions_of_function

        return await versions_of_function(info, self.id)

    @classmethod
    def from_view(cls, function: FunctionView) -> FunctionType:
        return cls(
            id=function.id,
            name=function.name,
            package_id=function.package_id,
            current_version=function.current_version,
            current_version_id=function.current_version_id,
            created_at=function.created_at,
        )


@strawberry.type(name="Job", description="One execution of a function.")
class JobType:
    id: str = strawberry.field(description="Identifier.")
    status: str = strawberry.field(description="`queued`, `running`, `success` or `failed`.")
    function_id: str = strawberry.field(description="Function executed.")
    function_version_id: str = strawberry.field(description="Exact version executed.")
    package_id: str = strawberry.field(description="Package of the function.")
    inputs: JSON = strawberry.field(description="Inputs as sent.")
    outputs: JSON | None = strawberry.field(description="Outputs on success.")
    error: JSON | None = strawberry.field(description="`kind` and `message` on failure.")
    logs: str | None = strawberry.field(description="Captured output, truncated to 64 KiB.")
    cache_hit: bool = strawberry.field(description="Answered from the result cache.")
    created_at: datetime = strawberry.field(description="Submission time.")
    started_at: datetime | None = strawberry.field(description="Start of execution.")
    finished_at: datetime | None = strawberry.field(description="End of execution.")

    @strawberry.field(description="The package of the job's function.")
    async def package(self, info: Info) -> PackageType:
        return await _package(info, self.package_id)

    @strawberry.field(description="The function the job executed.")
    async def function(self, info: Info) -> FunctionType:
        function = await loaders_of(info).function_by_id.load(self.function_id)
        if function is None:
            raise PermissionDenied(f"you may not access function {self.function_id!r}")
        return FunctionType.from_view(function)

    @classmethod
    def from_view(cls, job: JobView) -> JobType:
        data: dict[str, Any] = {
            "id": job.id,
            "status": job.status,
            "function_id": job.function_id,
            "function_version_id": job.function_version_id,
            "package_id": job.package_id,
            "inputs": job.inputs,
            "outputs": job.outputs,
            "error": job.error,
            "logs": job.logs,
            "cache_hit": job.cache_hit,
            "created_at": job.created_at,
            "started_at": job.started_at,
            "finished_at": job.finished_at,
        }
        return cls(**data)


@strawberry.type(description="A page of packages.")
class PackagePage:
    items: list[PackageType] = strawberry.field(description="Packages of this page.")
    next_cursor: str | None = strawberry.field(description="Cursor of the next page, if any.")


@strawberry.type(description="A page of functions.")
class FunctionPage:
    items: list[FunctionType] = strawberry.field(description="Functions of this page.")
    next_cursor: str | None = strawberry.field(description="Cursor of the next page, if any.")


@strawberry.type(description="A page of jobs.")
class JobPage:
    items: list[JobType] = strawberry.field(description="Jobs of this page, newest first.")
    next_cursor: str | None = strawberry.field(description="Cursor of the next page, if any.")
