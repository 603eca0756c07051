"""All SQL of canary deployments (contract 11): the running canary of a package, the jobs it
routed, the candidate's finished jobs, and the one conditional UPDATE that ends it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, insert, select, update

from calcgraph.db.base import RepositoryBase
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages.canary_rules import FinishedJob
from calcgraph.domain.packages.models import CanaryJob, PackageCanary

RUNNING = "running"


class CanaryRepository(RepositoryBase[PackageCanary]):
    model = PackageCanary

    async def running(self, package_id: str) -> PackageCanary | None:
        """The package's running canary (one statement on every unpinned execute)."""
        return await self.session.scalar(
            select(PackageCanary)
            .where(PackageCanary.package_id == package_id, PackageCanary.status == RUNNING)
            .limit(1)
        )

    async def all_running(self, limit: int = 500) -> list[PackageCanary]:
        return await self.all_where(
            PackageCanary.status == RUNNING, PackageCanary.ends_at, limit=limit
        )

    async def latest(self, package_id: str) -> list[PackageCanary]:
        """Every canary of the package, oldest first."""
        return await self.all_where(
            PackageCanary.package_id == package_id, PackageCanary.started_at, PackageCanary.id
        )

    async def routed(self, job_id: str, canary_id: str, version: str) -> None:
        await self.session.execute(
            insert(CanaryJob).values(job_id=job_id, canary_id=canary_id, version=version)
        )

    async def finished_jobs(self, canary_id: str, version: str) -> list[FinishedJob]:
        """The jobs routed to `version` that finished, leaving out result-cache answers (the
        candidate did not run for those)."""
        rows = await self.session.execute(
            select(Job.status, Job.error, Job.started_at, Job.finished_at)
            .join(CanaryJob, CanaryJob.job_id == Job.id)
            .where(
                CanaryJob.canary_id == canary_id,
                CanaryJob.version == version,
                Job.status.in_(("success", "failed")),
                Job.cache_hit.is_(False),
            )
        )
        return [
            FinishedJob(
                failed=status == "failed",
                kind=str(error.get("kind")) if isinstance(error, dict) else None,
                started_at=started,
                finished_at=finished,
            )
            for status, error, started, finished in rows
        ]

    async def routed_counts(self, canary_id: str) -> dict[str, int]:
        """Jobs routed to each version so far (the observed split)."""
        rows = await self.session.execute(
            select(CanaryJob.version, func.count())
            .where(CanaryJob.canary_id == canary_id)
            .group_by(CanaryJob.version)
        )
        return {str(version): int(count) for version, count in rows}

    async def decide(self, canary_id: str, status: str, reason: str, at: datetime) -> bool:
        """`running` -> `status`, once: of two timers (or a timer and a promote) deciding one
        canary, exactly one sees a row changed."""
        result = await self.session.execute(
            update(PackageCanary)
            .where(PackageCanary.id == canary_id, PackageCanary.status == RUNNING)
            .values(status=status, reason=reason[:500], decided_at=at)
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0) == 1)

    async def decided_candidates(self, package_id: str) -> Sequence[str]:
        rows = await self.session.scalars(
            select(PackageCanary.candidate).where(
                PackageCanary.package_id == package_id, PackageCanary.status != RUNNING
            )
        )
        return list(rows)
