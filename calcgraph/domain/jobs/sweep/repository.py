"""The SQL of the sweeper's round (`service`): stale queued jobs, running jobs whose heartbeat
stopped, and their guarded hand-overs and give-ups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.store.repository import JobStoreRepository
from calcgraph.domain.runs import changes


@dataclass(frozen=True)
class Stalled:
    """A running job whose worker stopped beating."""

    job_id: str
    lease: str | None
    deliveries: int
    workflow_run_id: str | None


class JobSweepRepository(JobStoreRepository):
    """The job store's repository with the sweeper's statements."""

    async def stale_queued(
        self, created_before: datetime, limit: int
    ) -> Sequence[tuple[str, int, datetime, str | None]]:
        rows = await self.session.execute(
            select(Job.id, Job.deliveries, Job.created_at, Job.workflow_run_id)
            .where(Job.status == "queued", Job.created_at < created_before)
            .order_by(Job.created_at)
            .limit(limit)
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    async def stalled_running(self, beat_before: datetime, limit: int) -> list[Stalled]:
        """Running jobs whose heartbeat stopped before `beat_before`."""
        rows = await self.session.execute(
            select(Job.id, Job.lease, Job.deliveries, Job.workflow_run_id)
            .where(Job.status == "running", Job.heartbeat_at < beat_before)
            .order_by(Job.heartbeat_at)
            .limit(limit)
        )
        return [Stalled(r[0], r[1], r[2], r[3]) for r in rows]

    async def requeue_stalled(self, job: Stalled) -> bool:
        """running -> queued, one delivery more, taking the lease from the stalled worker:
        guarded by that lease, so two sweepers hand it over once and a late result of the old
        worker finds 0 rows."""
        return await self._transition(
            (Job.id == job.job_id, Job.status == "running", Job.lease == job.lease),
            status="queued",
            started_at=None,
            lease=None,
            heartbeat_at=None,
            deliveries=job.deliveries + 1,
        )

    async def fail_stalled(self, job: Stalled, error: dict[str, Any], now: datetime) -> bool:
        failed = await self._transition(
            (Job.id == job.job_id, Job.status == "running", Job.lease == job.lease),
            status="failed",
            error=error,
            finished_at=now,
        )
        if failed:
            changes.changed(job.workflow_run_id)
        return failed

    async def count_delivery(self, job_id: str, deliveries: int) -> bool:
        """One more delivery, unless another sweeper counted it first."""
        return await self._transition(
            (Job.id == job_id, Job.status == "queued", Job.deliveries == deliveries),
            deliveries=deliveries + 1,
        )

    async def fail_queued(self, job_id: str, error: dict[str, Any], now: datetime) -> bool:
        failed = await self._transition(
            (Job.id == job_id, Job.status == "queued"),
            status="failed",
            error=error,
            finished_at=now,
        )
        if failed:
            changes.everything()  # the sweeper's rare give-up: its run is not at hand
        return failed

    async def fail_stuck_running(
        self, started_before: datetime, error: dict[str, Any], now: datetime
    ) -> list[str]:
        ids = list(
            await self.session.scalars(
                # Rows with no heartbeat (claimed before leases existed); the rest are the
                # heartbeat's (`stalled_running`).
                select(Job.id).where(
                    Job.status == "running",
                    Job.started_at < started_before,
                    Job.heartbeat_at.is_(None),
                )
            )
        )
        failed = []
        for job_id in ids:
            running = (Job.id == job_id, Job.status == "running")
            if await self._transition(running, status="failed", error=error, finished_at=now):
                failed.append(job_id)
        if failed:
            changes.everything()
        return failed
