"""A deployment's dependency closure, resolved under the deployer's rights (contract 11,
Dependencies; the rules are `dependency_rules`); publishing calls it in its unit of work."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.packages.dependency_rules import Pin, closure, pin_map, resolve_direct
from calcgraph.domain.packages.manifest import Manifest
from calcgraph.domain.packages.repository import DependencyRepository


class DependencyService:
    """Decisions where the contract is silent (docs/packages.md, Dependencies): the deployer's
    right to see a dependency is checked for the declared ones, at deployment; those brought
    along come as their own deployment pinned them, unchecked again."""

    async def resolve(
        self,
        session: AsyncSession,
        principal: Principal,
        manifest: Manifest,
        own_files: Iterable[str],
    ) -> tuple[Pin, ...]:
        """Every pin the new version will carry, direct first; ValidationError (422)
        otherwise."""
        declared = manifest.package.dependencies
        if not declared:
            return ()
        repository = DependencyRepository.from_session(session)
        direct = resolve_direct(declared, await repository.hosted(principal, list(declared)))
        brought = await repository.closures([p.version_id for p in direct])
        return closure(manifest.package.name, direct, brought, own_files)

    async def pin_maps(
        self, session: AsyncSession, package_version_ids: Sequence[str]
    ) -> dict[str, dict[str, str]]:
        """`{name: version}` of each deployment's stored closure, by deployment id."""
        stored = await DependencyRepository.from_session(session).closures(package_version_ids)
        return {owner: pin_map(pins) for owner, pins in stored.items()}

    async def store(
        self, session: AsyncSession, package_version_id: str, pins: Sequence[Pin]
    ) -> None:
        if pins:
            await DependencyRepository.from_session(session).pin(package_version_id, pins)


dependency_service = DependencyService()
