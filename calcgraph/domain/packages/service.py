"""Reading packages under the access policy. (Publishing belongs to the packages issue.)"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import found
from calcgraph.domain.listing.service import RepositoryRead, VisibleListing
from calcgraph.domain.packages.models import Package
from calcgraph.domain.packages.repository import PackageRepository, PackageVersionRepository
from calcgraph.domain.packages.views import PackageView


class PackageReadService:
    list_packages = VisibleListing(PackageRepository.from_session)
    """`search`: a case-insensitive part of the name."""

    async def get_package(
        self, session: AsyncSession, principal: Principal, package_id: str
    ) -> PackageView:
        package = await PackageRepository.from_session(session).get_view(package_id)
        return await access_service.visible(session, principal, package, "package", package_id)

    async def find(
        self, session: AsyncSession, principal: Principal, package_ref: str
    ) -> tuple[Package, PackageView]:
        """A package by id, else name, and its view: NotFound when there is none, refused
        when the caller may not see it."""
        package = found(
            await PackageVersionRepository.from_session(session).find_package(package_ref),
            f"package {package_ref!r}",
        )
        return package, await self.get_package(session, principal, package.id)

    async def ensure_visible(
        self, session: AsyncSession, principal: Principal, package_id: str
    ) -> None:
        """For other features (execute, workflows): raise unless the caller may see it."""
        await self.get_package(session, principal, package_id)

    async def visible_packages(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, PackageView]:
        """The packages among `ids` the caller may see, by id (for DataLoaders)."""
        repository = PackageRepository.from_session(session)
        visible = await repository.visible_ids(principal, ids)
        return {p.id: p for p in await repository.get_views(sorted(visible))}

    visible_by_organization = RepositoryRead(
        PackageRepository.from_session, PackageRepository.visible_by_organization
    )
    """`(session, principal, organization_ids)`: the visible packages of each organization."""


package_read_service = PackageReadService()
