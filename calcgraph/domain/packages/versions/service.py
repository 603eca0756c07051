"""One package version in detail, and the interface differences between two (contract 11,
Breaking changes): both doors and the CLI's `packages diff` read these."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.repository import FunctionVersionRepository
from calcgraph.domain.packages.addressing import select_version
from calcgraph.domain.packages.interface_diff import function_changes
from calcgraph.domain.packages.models import PackageVersion
from calcgraph.domain.packages.repository import DependencyRepository, PackageVersionRepository
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.views import (
    FunctionInterfaceView,
    PackageDiffView,
    PackageVersionDetailView,
    PackageView,
    PinnedDependencyView,
)
from calcgraph.domain.read_models import from_attributes


class PackageVersionService:
    async def _deployment(
        self, session: AsyncSession, package: PackageView, selector: str
    ) -> PackageVersion:
        deployments = await PackageVersionRepository.from_session(session).versions_of(package.id)
        chosen = select_version(
            [d.version for d in deployments],
            selector,
            subject=f"package {package.name!r}",
            current=next((d.version for d in deployments if d.is_latest), None),
        )
        return next(d for d in deployments if d.version == chosen)

    async def _functions(
        self, session: AsyncSession, deployment: PackageVersion
    ) -> tuple[FunctionInterfaceView, ...]:
        carried = await FunctionVersionRepository.from_session(session).in_deployment(deployment.id)
        return tuple(
            from_attributes(FunctionInterfaceView, v, name=name, version_id=v.id)
            for name, v in carried
        )

    async def version_detail(
        self, session: AsyncSession, principal: Principal, package_ref: str, version: str
    ) -> PackageVersionDetailView:
        _, package = await package_read_service.find(session, principal, package_ref)
        deployment = await self._deployment(session, package, version)
        section: dict[str, Any] = dict(deployment.manifest.get("package") or {})
        pins = await DependencyRepository.from_session(session).closures([deployment.id])
        return from_attributes(
            PackageVersionDetailView,
            deployment,
            package=package.name,
            compatibility=section.get("compatibility"),
            migration_guide=section.get("migration_guide"),
            dependencies=dict(section.get("dependencies") or {}),
            functions=await self._functions(session, deployment),
            pinned_dependencies=tuple(
                from_attributes(PinnedDependencyView, p) for p in pins.get(deployment.id, [])
            ),
        )

    async def diff(
        self,
        session: AsyncSession,
        principal: Principal,
        package_ref: str,
        from_version: str,
        to_version: str,
    ) -> PackageDiffView:
        """Every interface change from `from_version` to `to_version`, breaking or not."""
        _, package = await package_read_service.find(session, principal, package_ref)
        from_deployment = await self._deployment(session, package, from_version)
        to_deployment = await self._deployment(session, package, to_version)
        before = await self._functions(session, from_deployment)
        after = await self._functions(session, to_deployment)
        old = {f.name: (f.inputs_schema, f.outputs_schema) for f in before}
        new = {f.name: (f.inputs_schema, f.outputs_schema) for f in after}
        changes = [
            change.as_dict()
            for name in sorted(set(old) | set(new))
            for change in function_changes(name, old.get(name), new.get(name))
        ]
        return PackageDiffView(
            package=package.name,
            from_version=from_deployment.version,
            to_version=to_deployment.version,
            changes=tuple(changes),
        )


package_version_service = PackageVersionService()
