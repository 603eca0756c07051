"""Query and mutation fields of identity and access-controlled reads: thin calls into the
services, with the principal the authentication middleware put on the request."""

from __future__ import annotations

import strawberry

from calcgraph.domain.access.paging import PageRequest
from calcgraph.domain.access.service import access_service
from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.packages.service import package_read_service
from calcgraph.schema.access import (
    MemberRole,
    MemberType,
    OrganizationType,
    UserType,
    principal_of,
)
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobPage, JobType
from calcgraph.schema.packages import FunctionPage, FunctionType, PackagePage, PackageType


@strawberry.type
class AccessQuery:
    @strawberry.field(description="The authenticated caller.")
    async def me(self, info: Info) -> UserType:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            return UserType.from_view(await access_service.me(session, principal))

    @strawberry.field(description="An organization; PermissionDenied for non-members.")
    async def organization(self, info: Info, slug: str) -> OrganizationType:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            org = await access_service.get_organization(session, principal, slug)
        return OrganizationType.from_view(org)

    @strawberry.field(description="Packages visible to the caller.")
    async def packages(
        self, info: Info, limit: int | None = None, cursor: str | None = None
    ) -> PackagePage:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            page = await package_read_service.list_packages(
                session, principal, PageRequest.parse(limit, cursor)
            )
        return PackagePage(
            items=[PackageType.from_view(p) for p in page.items], next_cursor=page.next_cursor
        )

    @strawberry.field(description="A package; PermissionDenied when it is not visible.")
    async def package(self, info: Info, id: strawberry.ID) -> PackageType:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            package = await package_read_service.get_package(session, principal, str(id))
        return PackageType.from_view(package)

    @strawberry.field(description="Functions visible to the caller.")
    async def functions(
        self, info: Info, limit: int | None = None, cursor: str | None = None
    ) -> FunctionPage:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            page = await function_read_service.list_functions(
                session, principal, PageRequest.parse(limit, cursor)
            )
        return FunctionPage(
            items=[FunctionType.from_view(f) for f in page.items], next_cursor=page.next_cursor
        )

    @strawberry.field(description="The caller's jobs whose package the caller can still see.")
    async def jobs(
        self, info: Info, limit: int | None = None, cursor: str | None = None
    ) -> JobPage:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            page = await job_read_service.list_jobs(
                session, principal, PageRequest.parse(limit, cursor)
            )
        items = [JobType.from_view(j) for j in page.items]
        return JobPage(items=items, next_cursor=page.next_cursor)

    @strawberry.field(description="A job; PermissionDenied when its package is not visible.")
    async def job(self, info: Info, id: strawberry.ID) -> JobType:
        principal = principal_of(info)
        async with info.context.database.read_session() as session:
            job = await job_read_service.get_job(session, principal, str(id))
        return JobType.from_view(job)


@strawberry.type
class AccessMutation:
    @strawberry.mutation(description="Create an organization; the caller becomes its owner.")
    async def create_organization(self, info: Info, slug: str, name: str) -> OrganizationType:
        principal = principal_of(info)
        async with info.context.database.write_session() as session:
            org = await access_service.create_organization(session, principal, slug, name)
        return OrganizationType.from_view(org)

    @strawberry.mutation(description="Add a member or change a role; owners and admins only.")
    async def add_member(
        self, info: Info, slug: str, username: str, role: MemberRole = MemberRole.member
    ) -> MemberType:
        principal = principal_of(info)
        async with info.context.database.write_session() as session:
            member = await access_service.add_member(session, principal, slug, username, role.value)
        return MemberType.from_view(member)

    @strawberry.mutation(description="Remove a member; owners, admins, or the member leaving.")
    async def remove_member(self, info: Info, slug: str, username: str) -> bool:
        principal = principal_of(info)
        async with info.context.database.write_session() as session:
            await access_service.remove_member(session, principal, slug, username)
        return True
