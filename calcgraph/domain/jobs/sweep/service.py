"""The sweeper's round over the job store: jobs whose worker stopped beating are handed over,
queued jobs whose message the broker lost are sent again, and both give up after
`max_deliveries`. Every transition is a guarded UPDATE (`repository`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.domain.events.service import record_job_transitions
from calcgraph.domain.jobs.enqueue import RUN_ACTOR, enqueue_job, job_message_id
from calcgraph.domain.jobs.sweep.repository import JobSweepRepository


@dataclass(frozen=True)
class SweepReport:
    resent: list[str] = field(default_factory=list)
    """Queued jobs whose message the broker no longer held: sent again."""
    waiting: int = 0
    """Queued jobs past `stale_after` whose message still waits in the broker: left alone."""
    handed_over: list[str] = field(default_factory=list)
    """Running jobs whose worker stopped beating: queued again for another worker."""
    given_up: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


Waiting = Callable[[Collection[str]], set[str] | None]
"""Which of these broker message ids the broker still holds (queued, delayed for a retry, or
fetched and not yet acknowledged); None when the broker cannot say (it is down)."""


class JobSweepService:
    async def sweep(
        self,
        session: AsyncSession,
        *,
        stale_after: float,
        max_deliveries: int,
        stuck_after: float,
        heartbeat_timeout: float,
        waiting: Waiting,
        node_actor: str = RUN_ACTOR,
        now: datetime | None = None,
        limit: int = 500,
    ) -> SweepReport:
        """The sweeper's round. Every transition is guarded, so concurrent sweepers (one per
        worker process) make each once.

        - A `running` job whose heartbeat is older than `heartbeat_timeout` lost its worker:
          queued again under a new delivery (guarded by the old lease, which no longer
          records anything) and sent to `node_actor` (a workflow node's) or `jobs.run`;
          after `max_deliveries` deliveries it fails with `infrastructure_error`.
        - A `queued` job older than `stale_after` whose message the broker no longer holds
          was lost (a send that failed, a broker restarted without its data): sent again.
          A job whose message still waits in the queue, however long, is left alone: age
          alone says nothing when hundreds of jobs wait for a worker.
        - A `running` job with no heartbeat at all (claimed before heartbeats existed)
          fails after `stuck_after`, as before."""
        now = now or utcnow()
        repository = JobSweepRepository.from_session(session)
        report = SweepReport()
        for stalled in await repository.stalled_running(
            now - timedelta(seconds=heartbeat_timeout), limit
        ):
            if stalled.deliveries >= max_deliveries:
                error = {
                    "kind": "infrastructure_error",
                    "message": f"the worker running the job stopped, {stalled.deliveries} times",
                }
                if await repository.fail_stalled(stalled, error, now):
                    report.given_up.append(stalled.job_id)
            elif await repository.requeue_stalled(stalled):
                actor = node_actor if stalled.workflow_run_id is not None else RUN_ACTOR
                enqueue_job(actor, stalled.job_id, stalled.deliveries + 1)
                report.handed_over.append(stalled.job_id)
        queued = await repository.stale_queued(now - timedelta(seconds=stale_after), limit)
        ids = {job_id: job_message_id(job_id, d) for job_id, d, _, _ in queued}
        held = waiting(list(ids.values())) if queued else None
        lost = [] if held is None else [q for q in queued if ids[q[0]] not in held]
        for job_id, deliveries, _, run_id in lost:
            if deliveries >= max_deliveries:
                error = {
                    "kind": "infrastructure_error",
                    "message": f"the job's message was lost {deliveries} times",
                }
                if await repository.fail_queued(job_id, error, now):
                    report.given_up.append(job_id)
            elif await repository.count_delivery(job_id, deliveries):
                enqueue_job(node_actor if run_id is not None else RUN_ACTOR, job_id, deliveries + 1)
                report.resent.append(job_id)
        report = replace(report, waiting=len(queued) - len(lost) if held is not None else 0)
        stuck_error = {
            "kind": "infrastructure_error",
            "message": "the worker running the job stopped before recording its result",
        }
        report.stuck.extend(
            await repository.fail_stuck_running(
                now - timedelta(seconds=stuck_after), stuck_error, now
            )
        )
        await record_job_transitions(session, ended=[*report.given_up, *report.stuck])
        return report


job_sweep_service = JobSweepService()
