"""Decide and authorize, the tick's middle steps: the pure tick on a loaded `RunSnapshot`,
then the owner's rights at this act (contract sections 3 and 8b): the room their queued-jobs
quota leaves, and their right to execute what the tick would submit and what the jobs whose
outputs it would copy into the run ran. A bound or a refusal is rare: the pure tick is run
again with it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id
from calcgraph.domain.access.service import access_service
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.runs.snapshot import RunSnapshot
from calcgraph.domain.runs.state import JobResult, TickResult
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.workflows.planner import Plan


def decide(
    snapshot: RunSnapshot,
    now: datetime,
    *,
    chains: bool,
    cancel: bool,
    room: int | None = None,
    refused: Collection[str] = frozenset(),
    results: Mapping[str, JobResult] | None = None,
) -> TickResult:
    """The pure tick on the snapshot (its plan and states loaded); `results` in place of the
    snapshot's when some are refused."""
    assert snapshot.plan is not None
    assert snapshot.states is not None
    return tick(
        snapshot.plan,
        snapshot.before,
        snapshot.states,
        snapshot.results if results is None else results,
        snapshot.run.resolved_inputs,
        now,
        lambda _: new_id(),
        started=snapshot.started,
        chains=chains,
        refused=refused,
        cancel=cancel,
        room=room,
    )


async def authorize(
    session: AsyncSession,
    snapshot: RunSnapshot,
    now: datetime,
    quotas: Quotas,
    *,
    chains: bool,
    cancel: bool,
) -> TickResult:
    """The tick's result once the owner's room and rights are applied to it."""
    result = decide(snapshot, now, chains=chains, cancel=cancel)
    user_id = snapshot.run.user_id
    room: int | None = None
    if result.jobs:
        # The owner's queued jobs, counted now (one indexed count, only when submitting).
        room = await quota_service.job_room(session, user_id, quotas)
        if len(result.jobs) > room:
            result = decide(snapshot, now, chains=chains, cancel=cancel, room=room)
    assert snapshot.plan is not None
    results = snapshot.results
    adopted = _adopted_outputs(snapshot.plan, result, results)
    if result.jobs or adopted:
        # One statement over those versions (not the run's). A job that finished after its
        # owner lost the right is reconciled as failed `permission_denied`: none of its
        # outputs reach the run.
        refused = await access_service.refused_executions(
            session,
            user_id,
            {j.function_version_id for j in result.jobs if j.function_version_id}
            | set(adopted.values()),
        )
        if refused:
            lost = {job for job, version in adopted.items() if version in refused}
            result = decide(
                snapshot,
                now,
                chains=chains,
                cancel=cancel,
                room=room,
                refused=refused,
                results={**results, **_refusals(lost, results)},
            )
    return result


def _adopted_outputs(
    frozen: Plan, result: TickResult, results: Mapping[str, JobResult]
) -> dict[str, str]:
    """The jobs whose outputs this tick's `result` copies into the run (their nodes became
    `success`), each with its function version."""
    found: dict[str, str] = {}
    for key, state in result.nodes.items():
        if state.status != "success" or state.job_id not in results:
            continue
        version = frozen.nodes[key].function_version_id
        if state.job_id is not None and version is not None:
            found[state.job_id] = version
    return found


def _refusals(lost: set[str], results: Mapping[str, JobResult]) -> dict[str, JobResult]:
    return {
        job_id: JobResult.failed(
            "permission_denied",
            "the run's owner may no longer execute the node's function: its package is not "
            "visible to them now; the job's outputs were not taken into the run",
            results[job_id].finished_at,
        )
        for job_id in lost
    }
