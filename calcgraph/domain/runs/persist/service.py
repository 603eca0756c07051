"""Persist, the tick's last step: `apply` writes a decided `TickResult` in the caller's unit
of work. Only the changed node rows and the run fields (the revision bumped) with the rows of
the submitted jobs and the unit's events so far, the run's end (on PostgreSQL one statement),
the submitted jobs' messages through the execution path (they leave after the commit), and
the memo told once the unit of work commits (never before: it could roll back, and another
tick would then write that revision)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.events.service import held_for_last_statement, record_run
from calcgraph.domain.jobs.cache_key import REFRESH, ResultLookup
from calcgraph.domain.jobs.enqueue import RUN_ACTOR
from calcgraph.domain.jobs.submission.service import NodeJob, job_submission_service
from calcgraph.domain.runs.chains.service import CHAIN_ACTOR
from calcgraph.domain.runs.snapshot import RunSnapshot
from calcgraph.domain.runs.state import RUN_TERMINAL, TickResult
from calcgraph.domain.runs.store.repository import RunStore
from calcgraph.domain.runs.views import RunRow


async def apply(
    session: AsyncSession,
    store: RunStore,
    snapshot: RunSnapshot,
    result: TickResult,
    cache: ResultLookup,
) -> None:
    """Write `result`, a change of the locked `snapshot`, which then holds the run as written
    (its fields and node states)."""
    assert snapshot.states is not None
    run = snapshot.run
    run_id = run.id
    ended_before = run.status in RUN_TERMINAL
    revision = run.revision
    after = result.run
    jobs = (
        await job_submission_service.node_job_rows(
            await _node_jobs(store, run, result), REFRESH if run.cache_refresh else cache
        )
        if result.jobs
        else None
    )
    if after.status in RUN_TERMINAL and not ended_before:
        await record_run(
            session,
            run_id,
            snapshot.facts.slug or run.workflow_id,
            after.status,
            after.first_failed_node_key,
            after.terminal_outputs,
        )
    # The unit's events so far (the run's end) written by the write, its last statement
    # (PostgreSQL): one round trip fewer than the hook's own INSERT before the commit.
    held = held_for_last_statement(session)
    events = held.take() if held is not None else []
    fields: dict[str, Any] = {
        "status": after.status,
        "completed_at": after.completed_at,
        "terminal_outputs": (
            None if after.terminal_outputs is None else dict(after.terminal_outputs)
        ),
        "error_message": after.error_message,
        "first_failed_node_key": after.first_failed_node_key,
        "retry_at": after.retry_at,
        "revision": revision + 1,
    }
    await store.repository.write_tick(
        run_id, result.nodes, fields, () if jobs is None else jobs.rows, events
    )
    if held is not None:
        held.written(events)
    if jobs is not None:
        await job_submission_service.node_jobs_written(session, jobs)
    snapshot.run = replace(run, **fields)
    snapshot.states = {**snapshot.states, **result.nodes}
    store.written(snapshot)


async def _node_jobs(store: RunStore, run: RunRow, result: TickResult) -> list[NodeJob]:
    # Every function version was resolved and frozen when the workflow version was saved.
    owners = await store.owners(
        {j.function_version_id for j in result.jobs if j.function_version_id}
    )
    jobs = []
    for request in result.jobs:
        version_id = request.function_version_id
        assert version_id is not None
        function_id, package_id = owners[version_id]
        jobs.append(
            NodeJob(
                job_id=request.job_id,
                function_version_id=version_id,
                function_id=function_id,
                package_id=package_id,
                user_id=run.user_id,
                run_id=run.id,
                node_key=request.node_key,
                attempt=result.nodes[request.node_key].attempt,
                resolved_inputs=request.inputs,
                actor=CHAIN_ACTOR if request.chain_rest else RUN_ACTOR,
            )
        )
    return jobs
