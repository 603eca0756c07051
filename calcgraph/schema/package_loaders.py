"""Per-request DataLoaders of package and function versions (the graph package -> versions
-> functions -> versions). Each batch opens its own short-lived read session and goes through
the services, so hidden packages' versions never load."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import FunctionVersionView
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.domain.packages.views import PackageVersionView
from calcgraph.schema.loading import none, session_loader


class PackageVersionsByPackageIdLoader(DataLoader[str, list[PackageVersionView]]):
    """Deployments of a package, oldest first (with the functions each carried)."""


class FunctionVersionByIdLoader(DataLoader[str, FunctionVersionView | None]):
    """One immutable function version; None when its package is hidden."""


class FunctionVersionsByFunctionIdLoader(DataLoader[str, list[FunctionVersionView]]):
    """Every version of a function, oldest first."""


@dataclass
class PackageLoaders:
    package_versions_by_package_id: PackageVersionsByPackageIdLoader
    function_version_by_id: FunctionVersionByIdLoader
    function_versions_by_function_id: FunctionVersionsByFunctionIdLoader

    @classmethod
    def build(cls, database: Database, principal: Principal) -> PackageLoaders:
        def versions(
            s: AsyncSession, ids: Sequence[str]
        ) -> Awaitable[dict[str, list[PackageVersionView]]]:
            return publishing_service.visible_versions_by_package(s, principal, ids)

        async def by_id(
            s: AsyncSession, ids: Sequence[str]
        ) -> dict[str, FunctionVersionView | None]:
            return dict(await function_version_service.visible_versions_by_id(s, principal, ids))

        def by_function(
            s: AsyncSession, ids: Sequence[str]
        ) -> Awaitable[dict[str, list[FunctionVersionView]]]:
            return function_version_service.visible_versions_by_function(s, principal, ids)

        return cls(
            package_versions_by_package_id=session_loader(
                PackageVersionsByPackageIdLoader, database, versions, list
            ),
            function_version_by_id=session_loader(FunctionVersionByIdLoader, database, by_id, none),
            function_versions_by_function_id=session_loader(
                FunctionVersionsByFunctionIdLoader, database, by_function, list
            ),
        )
