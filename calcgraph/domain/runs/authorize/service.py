"""Authorize, the tick's third step: the run owner's rights at this act (contract sections 3
and 8b) applied to the pure tick's result: the room their queued-jobs quota leaves, and their
right to execute what the tick would submit and what the jobs whose outputs it would copy
into the run ran, read in one statement. A bound or a refusal is rare: the pure tick is run
again with it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id
from calcgraph.domain.access.service import access_service
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.runs.decide import adopted_outputs, decide, refusals
from calcgraph.domain.runs.snapshot import RunSnapshot
from calcgraph.domain.runs.state import TickResult


def _new_job_id(node_key: str) -> str:
    return new_id()


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
    result = decide(snapshot, now, _new_job_id, chains=chains, cancel=cancel)
    assert snapshot.plan is not None
    results = snapshot.results
    user_id = snapshot.run.user_id
    asked = _versions(snapshot, result)
    if not asked and not result.jobs:
        return result
    # One statement over those versions (not the run's), the owner's queued jobs counted in
    # it when the tick submits. A job that finished after its owner lost the right is
    # reconciled as failed `permission_denied`: none of its outputs reach the run.
    refused, queued = await access_service.execution_rights(
        session, user_id, asked, queued_jobs=bool(result.jobs)
    )
    room: int | None = None
    if result.jobs:
        room = await quota_service.job_room(session, user_id, quotas, queued)
        if len(result.jobs) > room:
            result = decide(snapshot, now, _new_job_id, chains=chains, cancel=cancel, room=room)
            # Only the versions of what the bounded tick submits or adopts are refused (the
            # rest wait for their room); any it asks beyond the first read, read now.
            wanted = _versions(snapshot, result)
            if wanted - asked:
                refused |= await access_service.refused_executions(session, user_id, wanted - asked)
            refused = frozenset(refused & wanted)
    if refused:
        adopted = adopted_outputs(snapshot.plan, result, results)
        lost = {job for job, version in adopted.items() if version in refused}
        result = decide(
            snapshot,
            now,
            _new_job_id,
            chains=chains,
            cancel=cancel,
            room=room,
            refused=refused,
            results={**results, **refusals(lost, results)},
        )
    return result


def _versions(snapshot: RunSnapshot, result: TickResult) -> set[str]:
    """The function versions `result` would submit, and those of the jobs whose outputs it
    would copy into the run: what the owner's rights are asked of."""
    assert snapshot.plan is not None
    adopted = adopted_outputs(snapshot.plan, result, snapshot.results)
    return {j.function_version_id for j in result.jobs if j.function_version_id} | set(
        adopted.values()
    )
