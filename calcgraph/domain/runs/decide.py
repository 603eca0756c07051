"""Decide, the tick's second step: the pure tick on a loaded `RunSnapshot`, and what its
authorization (`authorize.service`) needs of a result. Pure."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime

from calcgraph.domain.runs.snapshot import RunSnapshot
from calcgraph.domain.runs.state import JobResult, TickResult
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.workflows.planner import Plan


def decide(
    snapshot: RunSnapshot,
    now: datetime,
    new_job_id: Callable[[str], str],
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
        new_job_id,
        started=snapshot.started,
        chains=chains,
        refused=refused,
        cancel=cancel,
        room=room,
    )


def adopted_outputs(
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


def refusals(lost: set[str], results: Mapping[str, JobResult]) -> dict[str, JobResult]:
    return {
        job_id: JobResult.failed(
            "permission_denied",
            "the run's owner may no longer execute the node's function: its package is not "
            "visible to them now; the job's outputs were not taken into the run",
            results[job_id].finished_at,
        )
        for job_id in lost
    }
