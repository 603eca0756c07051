"""Which version of a package unpinned calls get (contract 11), both doors' use cases.

- `rolling` (default): a deployment that is the package's latest becomes current at once.
- `blue-green`: a deployment is hosted (reachable by `@version`) and off until
  `promote` makes it current; `rollback` makes the previous current version current again.
- Every change is kept as history (`deployed`, `promoted`, `rolled_back`), shown by
  `GET /packages/{id}/deployment`. Promote and roll back: the package's owner, the owners of
  its organization, admins (the `manage_package` demand).
- `canary` (`packages/canary/service.py`): while a canary runs, the state is `canary`, with its
  `traffic_split`, `started_at`, `ends_at` and the candidate's `observed` figures (null
  otherwise). A promote during it ends it; a roll-back during it ends it and keeps the
  current version.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.engine import one_snapshot
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import Conflict, PermissionDenied
from calcgraph.domain.packages.addressing import select_version
from calcgraph.domain.packages.canary.service import announce, canary_service
from calcgraph.domain.packages.models import Package, PackageDeploymentEvent, PackageVersion
from calcgraph.domain.packages.repository import DeploymentRepository, PackageVersionRepository
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.views import DeploymentHistoryEntry, DeploymentStateView

CURRENT_ACTIONS = ("promoted", "rolled_back")


def _currents(history: list[PackageDeploymentEvent]) -> list[str]:
    """The versions made current, in order."""
    return [e.version for e in history if e.action in CURRENT_ACTIONS]


def _candidate(history: list[PackageDeploymentEvent], current: str | None) -> str | None:
    """The newest hosted version no later event promoted or rolled back, unless current."""
    for index in range(len(history) - 1, -1, -1):
        event = history[index]
        if event.action != "deployed":
            continue
        later = history[index + 1 :]
        if event.version != current and not any(e.version == event.version for e in later):
            return event.version
        return None
    return None


class DeploymentService:
    async def record_deployed(
        self, session: AsyncSession, package: Package, version: str, strategy: str, current: bool
    ) -> None:
        """A deployment's history: hosted, and (rolling, or a first deployment) current."""
        repository = DeploymentRepository.from_session(session)
        await repository.record(package.id, version, "deployed", f"deployed ({strategy})")
        if current:
            await repository.record(
                package.id, version, "promoted", f"{strategy}: current on deployment"
            )

    async def _manageable(
        self, session: AsyncSession, principal: Principal, package_ref: str
    ) -> Package:
        package, _ = await package_read_service.find(session, principal, package_ref)
        refusal = (
            f"package {package.name!r} for promotion or roll-back: its owner, the owners of "
            "its organization and admins decide which version is current"
        )
        await access_service.require(session, principal, ("manage_package", refusal), on=package)
        # Promote, roll back and deploy of one package take turns (the row lock deployments
        # take), so the package's and its functions' current versions always agree.
        locked = await PackageVersionRepository.from_session(session).lock_package(package.name)
        assert locked is not None  # found above, in this unit of work
        return locked

    async def _may_manage(
        self, session: AsyncSession, principal: Principal, package: Package
    ) -> bool:
        try:
            await access_service.require(session, principal, ("manage_package", ""), on=package)
        except PermissionDenied:
            return False
        return True

    @one_snapshot
    async def state(
        self, session: AsyncSession, principal: Principal, package_ref: str
    ) -> DeploymentStateView:
        package, view = await package_read_service.find(session, principal, package_ref)
        deployments = await PackageVersionRepository.from_session(session).versions_of(package.id)
        history = await DeploymentRepository.from_session(session).history(package.id)
        newest = deployments[-1] if deployments else None
        section = (newest.manifest.get("package") or {}) if newest is not None else {}
        strategy = str((section.get("deployment") or {}).get("strategy", "rolling"))
        candidate = _candidate(history, view.current_version)
        canary = await canary_service.figures(session, package.id)
        state = "awaiting_promotion" if candidate is not None else "stable"
        if canary is not None:
            state, candidate = "canary", canary.candidate
        return DeploymentStateView(
            package_id=package.id,
            strategy=strategy,
            state=state,
            current=view.current_version,
            candidate=candidate,
            traffic_split=canary.traffic_split if canary is not None else None,
            started_at=canary.started_at if canary is not None else None,
            ends_at=canary.ends_at if canary is not None else None,
            observed=canary.observed if canary is not None else None,
            criteria=canary.criteria if canary is not None else None,
            viewer_may_decide=await self._may_manage(session, principal, package),
            history=tuple(
                DeploymentHistoryEntry(e.version, e.action, e.created_at, e.reason) for e in history
            ),
        )

    async def _deployment(
        self, session: AsyncSession, package: Package, selector: str
    ) -> tuple[PackageVersion, PackageVersion | None]:
        """The deployment `selector` names, and the current one."""
        deployments = await PackageVersionRepository.from_session(session).versions_of(package.id)
        current = next((d for d in deployments if d.is_latest), None)
        chosen = select_version(
            [d.version for d in deployments],
            selector,
            subject=f"package {package.name!r}",
            current=current.version if current is not None else None,
        )
        return next(d for d in deployments if d.version == chosen), current

    async def promote(
        self, session: AsyncSession, principal: Principal, package_ref: str, version: str
    ) -> DeploymentStateView:
        """`POST /packages/{id}/versions/{version}/promote`: that hosted version is current."""
        package = await self._manageable(session, principal, package_ref)
        target, current = await self._deployment(session, package, version)
        if current is not None and current.id == target.id:
            raise Conflict(f"package {package.name!r} version {target.version} is already current")
        previous = current.version if current is not None else None
        await canary_service.end_by_hand(session, principal, package, target.version)
        repository = DeploymentRepository.from_session(session)
        await repository.make_current(package.id, target)
        reason = f"promoted by {principal.username}" + (
            f", replacing {previous}" if previous else ""
        )
        await repository.record(package.id, target.version, "promoted", reason)
        await announce(session, package, target.version, previous, "promoted", reason)
        return await self.state(session, principal, package.id)

    async def rollback(
        self, session: AsyncSession, principal: Principal, package_ref: str
    ) -> DeploymentStateView:
        """`POST /packages/{id}/rollback`: the previous current version is current again."""
        package = await self._manageable(session, principal, package_ref)
        if await canary_service.end_by_hand(session, principal, package, None):
            # During a canary the current version stayed current: ending it is the roll-back.
            return await self.state(session, principal, package.id)
        repository = DeploymentRepository.from_session(session)
        deployments = await PackageVersionRepository.from_session(session).versions_of(package.id)
        current = next((d for d in deployments if d.is_latest), None)
        chain = _currents(await repository.history(package.id))
        previous = next(
            (v for v in reversed(chain) if current is None or v != current.version), None
        )
        target = next((d for d in deployments if d.version == previous), None)
        if target is None:
            raise Conflict(
                f"package {package.name!r} has no earlier current version to roll back to"
            )
        await repository.make_current(package.id, target)
        was = current.version if current is not None else None
        reason = f"rolled back by {principal.username} from {was}"
        await repository.record(package.id, target.version, "rolled_back", reason)
        await announce(session, package, target.version, was, "rolled_back", reason)
        return await self.state(session, principal, package.id)


deployment_service = DeploymentService()
