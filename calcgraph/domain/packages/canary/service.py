"""Canary deployments (contract 11): started by a deployment, consulted by every unpinned
execute, judged by the workers' timer, ended by a promote or a roll-back.

- A canary deployment (`strategy: canary`, `enabled: true`, not the package's first) hosts
  the new version without making it current and starts a canary, `running` until judged.
  Another deployment of the package meanwhile is refused (409): promote or roll back first.
- An unpinned execute (no `@version`, `@latest`, or a function id) of a package with a
  running canary is routed by `canary_rules.route` between the split's versions; the job
  remembers the version (`canary_jobs`). Workflow versions are resolved when saved, by the
  resolver, which is not routed: they get the current version, never the candidate.
- The timer (`judge`, from the canary judge every worker process runs beside its sweeper, at
  least every `canary_rules.JUDGE_INTERVAL_SECONDS`) decides each running canary
  by `canary_rules.verdict`; of concurrent timers one wins the conditional UPDATE and only it
  changes the current version, writes the history and records the event.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import Conflict, NotFound
from calcgraph.domain.events.catalog import DEPLOYMENT_PROMOTED, DEPLOYMENT_ROLLED_BACK
from calcgraph.domain.events.service import record
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import ResolvedFunction
from calcgraph.domain.packages import canary_rules
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.domain.packages.canary.repository import CanaryRepository
from calcgraph.domain.packages.manifest_package import Canary
from calcgraph.domain.packages.models import Package, PackageCanary
from calcgraph.domain.packages.repository import DeploymentRepository, PackageVersionRepository


@dataclass(frozen=True)
class Routed:
    """Which version of a running canary one call was given."""

    canary_id: str
    version: str


@dataclass(frozen=True)
class CanaryFigures:
    """What `GET /packages/{id}/deployment` shows of a running canary."""

    candidate: str
    traffic_split: dict[str, float]
    started_at: datetime
    ends_at: datetime
    observed: dict[str, Any]
    criteria: dict[str, float | None]


@dataclass(frozen=True)
class Decision:
    package: str
    candidate: str
    action: str
    reason: str


def criteria_of(canary: PackageCanary) -> canary_rules.Criteria:
    return canary_rules.Criteria(canary.error_rate_max, canary.latency_p95_max_ms)


async def announce(
    session: AsyncSession,
    package: Package,
    version: str,
    previous: str | None,
    action: str,
    why: str,
) -> None:
    """`calcgraph.deployment.promoted` / `.rolled_back` (contract sections 9 and 11), in the
    unit of work that changed the current version, beside its history row."""
    await record(
        session,
        DEPLOYMENT_PROMOTED if action == "promoted" else DEPLOYMENT_ROLLED_BACK,
        package.id,
        {"package": package.name, "version": version, "previous": previous, "reason": why},
    )


class CanaryService:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        """The draws of `route`; tests seed it (`canary_service.rng.seed(n)`)."""

    async def refuse_during_canary(self, session: AsyncSession, package: Package) -> None:
        running = await CanaryRepository.from_session(session).running(package.id)
        if running is not None:
            raise Conflict(
                f"package {package.name!r} has a canary of {running.candidate} running until "
                f"{running.ends_at.isoformat()}: promote it (POST /packages/{package.id}/"
                f"versions/{running.candidate}/promote) or roll it back (POST /packages/"
                f"{package.id}/rollback) before deploying again"
            )

    async def start(
        self,
        session: AsyncSession,
        package: Package,
        canary: Canary,
        candidate: str,
        current: str | None,
        now: datetime | None = None,
    ) -> None:
        now = now or utcnow()
        duration = canary.duration_seconds or canary_rules.DEFAULT_DURATION_SECONDS
        session.add(
            PackageCanary(
                package_id=package.id,
                candidate=candidate,
                current=current,
                traffic_split=dict(canary.traffic_split),
                error_rate_max=canary.success_criteria.error_rate_max,
                latency_p95_max_ms=canary.success_criteria.latency_p95_max_ms,
                started_at=now,
                ends_at=now + timedelta(seconds=duration),
                status="running",
            )
        )
        await DeploymentRepository.from_session(session).record(
            package.id,
            candidate,
            "canary_started",
            f"canary: {_split_text(canary.traffic_split)} for {duration} s",
        )

    async def route(
        self, session: AsyncSession, principal: Principal, target: ResolvedFunction
    ) -> tuple[ResolvedFunction, Routed | None]:
        """The function version an unpinned call runs: `target` (the current one) unless the
        package has a running canary whose draw names another version carrying it."""
        canary = await CanaryRepository.from_session(session).running(target.function.package_id)
        if canary is None:
            return target, None
        split = [(str(v), float(share)) for v, share in canary.traffic_split.items()]
        chosen = canary_rules.route(split, self.rng.random())
        if chosen == canary.current:
            return target, Routed(canary.id, chosen)
        try:
            deployed = ExecuteAddress(
                package=target.function.package_id,
                package_selector=chosen,
                function=target.function.name,
            )
            routed = await function_version_service.resolve_function_version(
                session, principal, deployed
            )
        except NotFound:
            # The chosen version does not carry this function: the current one runs it.
            return target, Routed(canary.id, canary.current or chosen)
        return routed, Routed(canary.id, chosen)

    async def remember(self, session: AsyncSession, job_id: str, routed: Routed) -> None:
        await CanaryRepository.from_session(session).routed(
            job_id, routed.canary_id, routed.version
        )

    async def figures(self, session: AsyncSession, package_id: str) -> CanaryFigures | None:
        repository = CanaryRepository.from_session(session)
        canary = await repository.running(package_id)
        if canary is None:
            return None
        observed = canary_rules.observe(await repository.finished_jobs(canary.id, canary.candidate))
        return CanaryFigures(
            candidate=canary.candidate,
            traffic_split={str(k): float(v) for k, v in canary.traffic_split.items()},
            started_at=canary.started_at,
            ends_at=canary.ends_at,
            observed={**observed.as_dict(), "routed": await repository.routed_counts(canary.id)},
            criteria={
                "error_rate_max": canary.error_rate_max,
                "latency_p95_max_ms": canary.latency_p95_max_ms,
            },
        )

    async def ended_candidates(self, session: AsyncSession, package_id: str) -> set[str]:
        return set(await CanaryRepository.from_session(session).decided_candidates(package_id))

    async def judge(self, session: AsyncSession, now: datetime | None = None) -> list[Decision]:
        """The timer's round: every running canary that is due, or whose candidate already
        fails too often, is promoted or rolled back, once."""
        now = now or utcnow()
        repository = CanaryRepository.from_session(session)
        decisions: list[Decision] = []
        for canary in await repository.all_running():
            due = canary.ends_at <= now
            if not due and canary.error_rate_max is None:
                continue  # nothing can end it early
            observed = canary_rules.observe(
                await repository.finished_jobs(canary.id, canary.candidate)
            )
            verdict = canary_rules.verdict(observed, criteria_of(canary), due=due)
            if verdict is None:
                continue
            decided = await self._apply(session, canary, verdict, now)
            if decided is not None:
                decisions.append(decided)
        return decisions

    async def _apply(
        self,
        session: AsyncSession,
        canary: PackageCanary,
        verdict: canary_rules.Verdict,
        now: datetime,
    ) -> Decision | None:
        packages = PackageVersionRepository.from_session(session)
        package = await session.get(Package, canary.package_id)
        if package is None:
            return None
        # The package row lock promote, roll back and deploy take, then the guarded UPDATE:
        # of every timer (one per worker process) deciding this canary, one changes a row.
        await packages.lock_package(package.name)
        if not await CanaryRepository.from_session(session).decide(
            canary.id, verdict.action, verdict.reason, now
        ):
            return None
        await self._conclude(session, package, canary, verdict.action, verdict.reason)
        return Decision(package.name, canary.candidate, verdict.action, verdict.reason)

    async def _conclude(
        self,
        session: AsyncSession,
        package: Package,
        canary: PackageCanary,
        action: str,
        reason: str,
    ) -> None:
        history = DeploymentRepository.from_session(session)
        if action == "promoted":
            deployments = await PackageVersionRepository.from_session(session).versions_of(
                package.id
            )
            target = next((d for d in deployments if d.version == canary.candidate), None)
            if target is None:
                return
            await history.make_current(package.id, target)
            await history.record(package.id, canary.candidate, "promoted", reason)
            await announce(session, package, canary.candidate, canary.current, action, reason)
            return
        # Rolled back: the current version stays (made current again, in the history's
        # terms), the candidate stays hosted and reachable by @version.
        kept = canary.current or canary.candidate
        text = f"canary of {canary.candidate} rolled back: {reason}"
        await history.record(package.id, kept, "rolled_back", text)
        await announce(session, package, kept, canary.candidate, action, text)

    async def end_by_hand(
        self,
        session: AsyncSession,
        principal: Principal,
        package: Package,
        promoted: str | None,
    ) -> bool:
        """A promote (`promoted`: the version made current) or a roll-back (None) during a
        canary ends it; the caller holds the package lock and was allowed. A roll-back keeps
        the current version (the caller then does nothing more): True when it happened here."""
        repository = CanaryRepository.from_session(session)
        canary = await repository.running(package.id)
        if canary is None:
            return False
        now = utcnow()
        if promoted is not None:
            status = "promoted" if promoted == canary.candidate else "rolled_back"
            await repository.decide(
                canary.id, status, f"ended by {principal.username}'s promotion of {promoted}", now
            )
            return False
        reason = f"rolled back by {principal.username}"
        if await repository.decide(canary.id, "rolled_back", reason, now):
            await self._conclude(session, package, canary, "rolled_back", reason)
        return True


def _split_text(split: Mapping[str, float]) -> str:
    return ", ".join(f"{version} {share:g}%" for version, share in split.items())


canary_service = CanaryService()
