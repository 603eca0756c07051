"""Query and mutation fields of identity and access-controlled reads: thin calls into the
services, with the principal the authentication middleware put on the request."""

from __future__ import annotations

from typing import Unpack

import strawberry

from calcgraph.domain.access.service import access_service
from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.quotas.service import quota_service
from calcgraph.resolvers.arguments import Paging, arguments
from calcgraph.resolvers.unit import read, read_page, searched_listing, write
from calcgraph.schema.access import (
    MemberRole,
    MemberType,
    OrganizationType,
    UserType,
    UserUsageType,
)
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobPage, JobType
from calcgraph.schema.packages import FunctionPage, FunctionType, PackagePage, PackageType


@strawberry.type
class AccessQuery:
    @strawberry.field(description="The authenticated caller.")
    async def me(self, info: Info) -> UserType:
        return UserType.from_view(await read(info, access_service.me))

    @strawberry.field(description="An organization; PermissionDenied for non-members.")
    async def organization(self, info: Info, slug: str) -> OrganizationType:
        org = await read(info, access_service.get_organization, slug)
        return OrganizationType.from_view(org)

    packages = searched_listing(
        package_read_service.list_packages,
        PackagePage,
        PackageType.from_view,
        "Packages visible to the caller; `search`: a case-insensitive part of the name.",
    )

    @strawberry.field(description="A package; PermissionDenied when it is not visible.")
    async def package(self, info: Info, id: strawberry.ID) -> PackageType:
        return PackageType.from_view(await read(info, package_read_service.get_package, str(id)))

    functions = searched_listing(
        function_read_service.list_functions,
        FunctionPage,
        FunctionType.from_view,
        "Functions visible to the caller; `search`: a case-insensitive part of `package/name`.",
    )

    @strawberry.field(
        description="The caller's jobs whose package the caller can still see, newest first. "
        "`function`: a case-insensitive part of `package/function`; `status`: any of these "
        "(`queued`, `running`, `success`, `failed`); `createdAfter` (inclusive) and "
        "`createdBefore` (exclusive): ISO 8601 dates (midnight UTC) or date-times."
    )
    @arguments(Paging, after="info")
    async def jobs(
        self,
        info: Info,
        function: str | None = None,
        status: list[str] | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        **paging: Unpack[Paging],
    ) -> JobPage:
        return await read_page(
            info,
            job_read_service.list_jobs,
            paging,
            JobPage,
            JobType.from_view,
            function=function,
            status=status,
            created_after=created_after,
            created_before=created_before,
        )

    @strawberry.field(
        description="What every user holds now against the quotas (contract 8b), most stored "
        "bytes first; admins only (PermissionDenied otherwise)."
    )
    async def usage(self, info: Info) -> list[UserUsageType]:
        return [UserUsageType.from_view(u) for u in await read(info, quota_service.usage)]

    @strawberry.field(description="A job; PermissionDenied when its package is not visible.")
    async def job(self, info: Info, id: strawberry.ID) -> JobType:
        return JobType.from_view(await read(info, job_read_service.get_job, str(id)))


@strawberry.type
class AccessMutation:
    @strawberry.mutation(description="Create an organization; the caller becomes its owner.")
    async def create_organization(self, info: Info, slug: str, name: str) -> OrganizationType:
        org = await write(info, access_service.create_organization, slug, name)
        return OrganizationType.from_view(org)

    @strawberry.mutation(description="Add a member or change a role; owners and admins only.")
    async def add_member(
        self, info: Info, slug: str, username: str, role: MemberRole = MemberRole.member
    ) -> MemberType:
        member = await write(info, access_service.add_member, slug, username, role.value)
        return MemberType.from_view(member)

    @strawberry.mutation(description="Remove a member; owners, admins, or the member leaving.")
    async def remove_member(self, info: Info, slug: str, username: str) -> bool:
        await write(info, access_service.remove_member, slug, username)
        return True
