"""Rows for access tests, written through the real services and models."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from calcgraph.db.engine import Database
from calcgraph.domain.access.models import Membership, Organization
from calcgraph.domain.access.principal import Identity, Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages.models import Package, PackageVersion
from tests.auth.idp import LocalIdentityProvider


async def create_user(
    database: Database,
    idp: LocalIdentityProvider,
    username: str,
    roles: Iterable[str] = ("user",),
) -> Principal:
    """The same user a token of `idp.token(username, roles)` provisions."""
    identity = Identity.from_claims(idp.claims(username, roles))
    async with database.write_session() as session:
        return await access_service.provision(session, identity)


async def create_organization(
    database: Database, slug: str, members: dict[Principal, str]
) -> Organization:
    async with database.write_session() as session:
        org = Organization(slug=slug, name=slug.title())
        session.add(org)
        await session.flush()
        for principal, role in members.items():
            session.add(Membership(organization_id=org.id, user_id=principal.user_id, role=role))
        await session.flush()
        return org


@dataclass(frozen=True)
class PackageRows:
    package_id: str
    function_id: str
    function_version_id: str


async def create_package(
    database: Database,
    owner: Principal,
    name: str,
    visibility: str,
    organization: Organization | None = None,
) -> PackageRows:
    async with database.write_session() as session:
        package = Package(
            name=name,
            owner_id=owner.user_id,
            organization_id=organization.id if organization else None,
            visibility=visibility,
        )
        session.add(package)
        await session.flush()
        version = PackageVersion(
            package_id=package.id, version="1.0.0", is_latest=True, manifest={"name": name}
        )
        function = Function(name="solve", package_id=package.id, current_version="1.0.0")
        session.add_all([version, function])
        await session.flush()
        function_version = FunctionVersion(
            function_id=function.id,
            package_version_id=version.id,
            version="1.0.0",
            handler="main:solve",
            code_checksum="0" * 64,
        )
        session.add(function_version)
        await session.flush()
        function.current_version_id = function_version.id
        await session.flush()
        return PackageRows(package.id, function.id, function_version.id)


async def create_job(database: Database, rows: PackageRows, user: Principal) -> str:
    async with database.write_session() as session:
        job = Job(
            function_id=rows.function_id,
            function_version_id=rows.function_version_id,
            package_id=rows.package_id,
            user_id=user.user_id,
            status="success",
            inputs={"x": 1},
            resolved_inputs={"x": 1},
            outputs={"y": 2},
        )
        session.add(job)
        await session.flush()
        return job.id


async def set_visibility(database: Database, package_id: str, visibility: str) -> None:
    async with database.write_session() as session:
        package = await session.get(Package, package_id)
        assert package is not None
        package.visibility = visibility
