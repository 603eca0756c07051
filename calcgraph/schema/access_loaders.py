"""Per-request DataLoaders of the access-controlled resources. Built once per request for its
principal, so every nested field goes through the same policy; each batch opens its own
short-lived read session (never one shared between concurrently resolving fields)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import OrganizationView
from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.functions.views import FunctionView
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.views import PackageView
from calcgraph.schema.loading import none, session_loader


@dataclass
class AccessLoaders:
    package_by_id: DataLoader[str, PackageView | None]
    """Visible packages only: a hidden one loads as None."""
    function_by_id: DataLoader[str, FunctionView | None]
    functions_by_package_id: DataLoader[str, list[FunctionView]]
    packages_by_organization_id: DataLoader[str, list[PackageView]]
    organization_by_id: DataLoader[str, OrganizationView | None]
    """Organizations the principal may read only."""

    @classmethod
    def build(cls, database: Database, principal: Principal) -> AccessLoaders:
        def packages(s: AsyncSession, ids: Sequence[str]) -> Awaitable[dict[str, PackageView]]:
            return package_read_service.visible_packages(s, principal, ids)

        def functions(s: AsyncSession, ids: Sequence[str]) -> Awaitable[dict[str, FunctionView]]:
            return function_read_service.visible_functions(s, principal, ids)

        def by_package(
            s: AsyncSession, ids: Sequence[str]
        ) -> Awaitable[dict[str, list[FunctionView]]]:
            return function_read_service.visible_by_package(s, principal, ids)

        def by_org(s: AsyncSession, ids: Sequence[str]) -> Awaitable[dict[str, list[PackageView]]]:
            return package_read_service.visible_by_organization(s, principal, ids)

        def orgs(s: AsyncSession, ids: Sequence[str]) -> Awaitable[dict[str, OrganizationView]]:
            return access_service.readable_organizations(s, principal, ids)

        return cls(
            package_by_id=session_loader(DataLoader, database, packages, none),  # type: ignore[misc]
            function_by_id=session_loader(DataLoader, database, functions, none),  # type: ignore[misc]
            functions_by_package_id=session_loader(DataLoader, database, by_package, list),
            packages_by_organization_id=session_loader(DataLoader, database, by_org, list),
            organization_by_id=session_loader(DataLoader, database, orgs, none),  # type: ignore[misc]
        )
