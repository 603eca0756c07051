"""All SQL of packages, including the access policy as a WHERE clause for listings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, and_, func, select, update
from sqlalchemy.orm import InstrumentedAttribute, aliased

from calcgraph.db.base import RepositoryBase, utcnow
from calcgraph.db.dialect import insert_ignoring_duplicates
from calcgraph.domain.access.models import Organization, User
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.repository import visible_clause_on
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.listing.repository import ViewRepository, name_contains
from calcgraph.domain.packages.dependency_rules import Hosted, Pin
from calcgraph.domain.packages.models import (
    CodeBlob,
    Package,
    PackageDeploymentEvent,
    PackageVersion,
    PackageVersionDependency,
    PackageVersionFunction,
)
from calcgraph.domain.packages.views import (
    DeployedFunctionView,
    PackageVersionView,
    PackageView,
)
from calcgraph.domain.read_models import from_attributes


def visible_clause(principal: Principal) -> ColumnElement[bool]:
    """`policy.can_see_package` as SQL, so hidden rows never load."""
    return visible_clause_on(
        principal, Package.owner_id, Package.visibility, Package.organization_id
    )


T = TypeVar("T")


def carried_versions(
    column: InstrumentedAttribute[T],
) -> Select[PackageVersionFunction, FunctionVersion, T]:
    """Each link of a deployment to a function version it carried, with that version and
    `column` (for a join the caller adds)."""
    return select(PackageVersionFunction, FunctionVersion, column).join(
        FunctionVersion, FunctionVersion.id == PackageVersionFunction.function_version_id
    )


class PackageRepository(ViewRepository[Package, PackageView]):
    model = Package

    def _views(self) -> Select[Package, str, str, str]:
        latest = aliased(PackageVersion)
        return (
            select(Package, User.username, Organization.slug, latest.version)
            .join(User, User.id == Package.owner_id)
            .outerjoin(Organization, Organization.id == Package.organization_id)
            .outerjoin(latest, and_(latest.package_id == Package.id, latest.is_latest.is_(True)))
        )

    @staticmethod
    def _view(row: Any) -> PackageView:
        package, owner, org_slug, version = row
        return from_attributes(
            PackageView, package, owner=owner, organization=org_slug, current_version=version
        )

    async def list_visible(
        self, principal: Principal, page: PageRequest, search: str | None = None
    ) -> Page[PackageView]:
        """`search`: in the name."""
        return await self._views_page(
            and_(visible_clause(principal), name_contains(Package.name, search)),
            Package.created_at,
            Package.id,
            page,
        )

    async def get_view(self, package_id: str) -> PackageView | None:
        return await self._first_view(Package.id == package_id)

    async def get_views(self, ids: Sequence[str]) -> list[PackageView]:
        return await self._views_in(Package.id, ids)

    async def visible_ids(self, principal: Principal, ids: Sequence[str]) -> set[str]:
        return await self._ids_in(Package.id, ids, visible_clause(principal))

    async def visible_by_organization(
        self, principal: Principal, organization_ids: Sequence[str]
    ) -> dict[str, list[PackageView]]:
        return await self._grouped_in(
            Package.organization_id,
            organization_ids,
            visible_clause(principal),
            order_by=(Package.name,),
        )


class PackageVersionRepository(RepositoryBase[PackageVersion]):
    """SQL of publishing: package rows by name, deployments, content-addressed code."""

    model = PackageVersion

    async def lock_package(self, name: str) -> Package | None:
        """The package row, locked until the unit of work ends (PostgreSQL), so concurrent
        deployments of one package take turns and each sees the other's versions. SQLite
        needs no lock: its write sessions begin IMMEDIATE and already run one at a time."""
        return await self.session.scalar(
            select(Package).where(Package.name == name).with_for_update()
        )

    async def name_in_other_case(self, name: str) -> str | None:
        """The name of another package that differs from `name` only in case, if any: names
        are unique without regard to case (contract section 8b)."""
        found = await self.session.scalar(
            select(Package.name)
            .where(func.lower(Package.name) == name.lower(), Package.name != name)
            .limit(1)
        )
        return str(found) if found is not None else None

    async def insert_package_if_missing(self, **values: Any) -> None:
        dialect = self.session.get_bind().dialect.name
        now = utcnow()
        await self.session.execute(
            insert_ignoring_duplicates(dialect, Package).values(
                created_at=now, updated_at=now, **values
            )
        )

    async def find_package(self, ref: str) -> Package | None:
        """By id, else by name (a name may look like an id; the id wins)."""
        by_id = await self.session.get(Package, ref)
        if by_id is not None:
            return by_id
        return await self.session.scalar(select(Package).where(Package.name == ref))

    async def versions_of(self, package_id: str) -> list[PackageVersion]:
        return await self.all_where(
            PackageVersion.package_id == package_id, PackageVersion.created_at, PackageVersion.id
        )

    async def add_blobs(self, blobs: dict[str, bytes]) -> None:
        if not blobs:
            return
        dialect = self.session.get_bind().dialect.name
        await self.session.execute(
            insert_ignoring_duplicates(dialect, CodeBlob),
            [{"sha256": sha, "content": data, "size": len(data)} for sha, data in blobs.items()],
        )

    async def clear_latest(self, package_id: str, keep_id: str) -> None:
        await self.session.execute(
            update(PackageVersion)
            .where(PackageVersion.package_id == package_id, PackageVersion.id != keep_id)
            .values(is_latest=False)
        )

    async def deployed_functions(
        self, package_version_ids: Sequence[str]
    ) -> list[DeployedFunctionView]:
        if not package_version_ids:
            return []
        rows = await self.session.execute(
            carried_versions(Function.name)
            .join(Function, Function.id == FunctionVersion.function_id)
            .where(PackageVersionFunction.package_version_id.in_(package_version_ids))
            .order_by(Function.name)
        )
        return [
            DeployedFunctionView(
                package_version_id=link.package_version_id,
                function_id=version.function_id,
                name=name,
                version=version.version,
                version_id=version.id,
                status=link.status,
                deployed_at=link.deployed_at,
            )
            for link, version, name in rows
        ]

    async def version_views(self, package_id: str) -> list[PackageVersionView]:
        versions = await self.versions_of(package_id)
        deployed = await self.deployed_functions([v.id for v in versions])
        return [version_view(v, deployed) for v in versions]

    async def version_views_by_package(
        self, package_ids: Sequence[str]
    ) -> list[PackageVersionView]:
        if not package_ids:
            return []
        versions = list(
            await self.session.scalars(
                select(PackageVersion)
                .where(PackageVersion.package_id.in_(package_ids))
                .order_by(PackageVersion.created_at, PackageVersion.id)
            )
        )
        deployed = await self.deployed_functions([v.id for v in versions])
        return [version_view(v, deployed) for v in versions]

    async def files_of(self, package_version_id: str) -> dict[str, bytes]:
        """The files of a deployment, `{path: content}`: what a sandbox stages."""
        version = await self.session.get(PackageVersion, package_version_id)
        if version is None:
            return {}
        paths: dict[str, str] = dict(version.files)
        blobs = await self.session.scalars(
            select(CodeBlob).where(CodeBlob.sha256.in_(set(paths.values())))
        )
        contents = {b.sha256: b.content for b in blobs}
        return {path: contents[sha] for path, sha in sorted(paths.items())}


class DependencyRepository(RepositoryBase[PackageVersionDependency]):
    """SQL of pinned dependencies (contract 11): what a deployer may depend on, and the
    closures stored with each package version."""

    model = PackageVersionDependency

    async def hosted(self, principal: Principal, names: Sequence[str]) -> dict[str, Hosted]:
        """The packages among `names` (without regard to case) that `principal` may see, with
        their hosted versions, by lowercased name; hidden ones never load."""
        if not names:
            return {}
        rows = await self.session.execute(
            select(Package.id, Package.name, PackageVersion.version, PackageVersion.id)
            .outerjoin(PackageVersion, PackageVersion.package_id == Package.id)
            .where(
                func.lower(Package.name).in_(sorted({n.lower() for n in names})),
                visible_clause(principal),
            )
        )
        packages: dict[str, tuple[str, str]] = {}
        versions: dict[str, dict[str, str]] = {}
        for package_id, name, version, version_id in rows:
            packages[name.lower()] = (package_id, name)
            if version is not None:
                versions.setdefault(name.lower(), {})[version] = version_id
        return {
            key: Hosted(package_id, name, versions.get(key, {}))
            for key, (package_id, name) in packages.items()
        }

    async def closures(self, package_version_ids: Sequence[str]) -> dict[str, list[Pin]]:
        """The stored closure of each of `package_version_ids` (direct pins first)."""
        if not package_version_ids:
            return {}
        rows = await self.session.execute(
            select(
                PackageVersionDependency.package_version_id,
                Package.name,
                PackageVersion.version,
                Package.id,
                PackageVersion.id,
                PackageVersionDependency.direct,
                PackageVersionDependency.range,
            )
            .join(
                PackageVersion, PackageVersion.id == PackageVersionDependency.dependency_version_id
            )
            .join(Package, Package.id == PackageVersion.package_id)
            .where(
                PackageVersionDependency.package_version_id.in_(sorted(set(package_version_ids)))
            )
            .order_by(PackageVersionDependency.direct.desc(), Package.name)
        )
        found: dict[str, list[Pin]] = {}
        for owner, name, version, package_id, version_id, direct, declared in rows:
            found.setdefault(owner, []).append(
                Pin(name, version, package_id, version_id, bool(direct), declared)
            )
        return found

    async def pin(self, package_version_id: str, pins: Sequence[Pin]) -> None:
        self.session.add_all(
            PackageVersionDependency(
                package_version_id=package_version_id,
                dependency_version_id=p.version_id,
                direct=p.direct,
                range=p.range,
            )
            for p in pins
        )
        await self.session.flush()


class DeploymentRepository(RepositoryBase[PackageDeploymentEvent]):
    """SQL of which version of a package is current, and its history (contract 11)."""

    model = PackageDeploymentEvent

    async def record(self, package_id: str, version: str, action: str, reason: str) -> None:
        self.session.add(
            PackageDeploymentEvent(
                package_id=package_id, version=version, action=action, reason=reason[:500]
            )
        )
        await self.session.flush()

    async def history(self, package_id: str) -> list[PackageDeploymentEvent]:
        event = PackageDeploymentEvent
        return await self.all_where(event.package_id == package_id, event.created_at, event.id)

    async def make_current(self, package_id: str, deployment: PackageVersion) -> None:
        """`deployment` becomes what unpinned calls get: the package's latest, and each of
        its functions' current version."""
        await self.session.execute(
            update(PackageVersion)
            .where(PackageVersion.package_id == package_id)
            .values(is_latest=PackageVersion.id == deployment.id)
            .execution_options(synchronize_session=False)
        )
        carried = await self.session.execute(
            select(FunctionVersion.function_id, FunctionVersion.id, FunctionVersion.version)
            .join(
                PackageVersionFunction,
                PackageVersionFunction.function_version_id == FunctionVersion.id,
            )
            .where(PackageVersionFunction.package_version_id == deployment.id)
        )
        for function_id, version_id, version in carried:
            await self.session.execute(
                update(Function)
                .where(Function.id == function_id)
                .values(current_version=version, current_version_id=version_id)
                .execution_options(synchronize_session=False)
            )
        await self.session.flush()


def version_view(
    version: PackageVersion, deployed: Sequence[DeployedFunctionView]
) -> PackageVersionView:
    return from_attributes(
        PackageVersionView,
        version,
        functions=tuple(d for d in deployed if d.package_version_id == version.id),
    )
