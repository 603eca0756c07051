"""All SQL of reading functions; a function is visible exactly when its package is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, and_, or_, select

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.functions.views import (
    FunctionVersionEntry,
    FunctionVersionView,
    FunctionView,
)
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.listing.repository import ViewRepository, name_contains
from calcgraph.domain.packages.models import Package, PackageVersion, PackageVersionFunction
from calcgraph.domain.packages.repository import carried_versions, visible_clause
from calcgraph.domain.read_models import from_attributes


class FunctionRepository(ViewRepository[Function, FunctionView]):
    model = Function

    def _views(self) -> Select[Function, str]:
        return select(Function, Package.name).join(Package, Package.id == Function.package_id)

    @staticmethod
    def _view(row: Any) -> FunctionView:
        function, package_name = row
        return from_attributes(FunctionView, function, package=package_name)

    async def list_visible(
        self,
        principal: Principal,
        page: PageRequest,
        package_id: str | None = None,
        search: str | None = None,
    ) -> Page[FunctionView]:
        """`search`: in `package/name`."""
        where = and_(
            visible_clause(principal), name_contains(Package.name + "/" + Function.name, search)
        )
        if package_id is not None:
            where = and_(where, Function.package_id == package_id)
        return await self._views_page(where, Function.created_at, Function.id, page)

    async def get_view(self, function_id: str) -> FunctionView | None:
        return await self._first_view(Function.id == function_id)

    async def visible_by_package(
        self, principal: Principal, package_ids: Sequence[str]
    ) -> dict[str, list[FunctionView]]:
        return await self._grouped_in(
            Function.package_id, package_ids, visible_clause(principal), order_by=(Function.name,)
        )

    async def get_views(self, ids: Sequence[str]) -> list[FunctionView]:
        return await self._views_in(Function.id, ids)


def function_version_view(row: FunctionVersion) -> FunctionVersionView:
    return from_attributes(FunctionVersionView, row)


class FunctionVersionRepository(ViewRepository[FunctionVersion, FunctionVersionView]):
    """SQL of function versions: history for a deployment, addressing, listings."""

    model = FunctionVersion

    async def functions_of_package(self, package_id: str) -> list[Function]:
        rows = await self.session.scalars(
            select(Function).where(Function.package_id == package_id).order_by(Function.name)
        )
        return list(rows)

    async def versions_of_functions(self, function_ids: Sequence[str]) -> list[FunctionVersion]:
        if not function_ids:
            return []
        return await self.all_where(
            FunctionVersion.function_id.in_(function_ids),
            FunctionVersion.created_at,
            FunctionVersion.id,
        )

    async def current_of_named(
        self, package: str, function: str
    ) -> tuple[Package, Function, FunctionVersion] | None:
        """Package (by id or name), function and its current version in one statement: the
        common call. None when any is missing (the general path then says which)."""
        row = (
            await self.session.execute(
                select(Package, Function, FunctionVersion)
                .join(Function, Function.package_id == Package.id)
                .join(FunctionVersion, FunctionVersion.id == Function.current_version_id)
                .where(
                    or_(Package.id == package, Package.name == package), Function.name == function
                )
                .limit(1)
            )
        ).first()
        return (row[0], row[1], row[2]) if row is not None else None

    async def function_named(self, package_id: str, name: str) -> Function | None:
        return await self.session.scalar(
            select(Function).where(Function.package_id == package_id, Function.name == name)
        )

    async def visible_named(self, principal: Principal, name: str) -> list[FunctionView]:
        """Functions of that name in every package the caller may see."""
        functions = FunctionRepository(self.session)
        rows = await self.session.execute(
            functions._views()
            .where(Function.name == name, visible_clause(principal))
            .order_by(Package.name)
        )
        return [functions._view(row) for row in rows]

    async def in_deployment(self, package_version_id: str) -> list[tuple[str, FunctionVersion]]:
        """(function name, version) of every function a deployment carried."""
        rows = await self.session.execute(
            select(Function.name, FunctionVersion)
            .join(
                PackageVersionFunction,
                PackageVersionFunction.function_version_id == FunctionVersion.id,
            )
            .join(Function, Function.id == FunctionVersion.function_id)
            .where(PackageVersionFunction.package_version_id == package_version_id)
            .order_by(Function.name)
        )
        return [(name, version) for name, version in rows]

    async def deployments_of(self, function_id: str) -> list[FunctionVersionEntry]:
        rows = await self.session.execute(
            carried_versions(PackageVersion.version)
            .join(PackageVersion, PackageVersion.id == PackageVersionFunction.package_version_id)
            .where(FunctionVersion.function_id == function_id)
            .order_by(PackageVersionFunction.deployed_at, PackageVersion.created_at)
        )
        return [
            from_attributes(
                FunctionVersionEntry,
                version,
                version_id=version.id,
                deployed_at=link.deployed_at,
                package_version=package_version,
                package_version_id=link.package_version_id,
                status=link.status,
            )
            for link, version, package_version in rows
        ]

    def _views(self) -> Select[FunctionVersion]:
        """Versions with their function and package, which the visibility rule reads."""
        return (
            select(FunctionVersion)
            .join(Function, Function.id == FunctionVersion.function_id)
            .join(Package, Package.id == Function.package_id)
        )

    @staticmethod
    def _view(row: Any) -> FunctionVersionView:
        return function_version_view(row[0])

    async def visible_views_by_function(
        self, principal: Principal, function_ids: Sequence[str]
    ) -> dict[str, list[FunctionVersionView]]:
        return await self._grouped_in(
            FunctionVersion.function_id,
            function_ids,
            visible_clause(principal),
            order_by=(FunctionVersion.created_at, FunctionVersion.id),
        )

    async def visible_views_by_id(
        self, principal: Principal, ids: Sequence[str]
    ) -> list[FunctionVersionView]:
        return await self._views_in(FunctionVersion.id, ids, visible_clause(principal))
