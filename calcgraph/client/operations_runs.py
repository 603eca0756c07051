"""What the workflow and run methods send and how their answers are read, free of I/O, as
`calcgraph.client.operations` does for the rest (`run_until_done` is a `Flow`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from calcgraph.client import models as m
from calcgraph.client.operations import (
    DEFAULT_PERIOD,
    MAX_TICK_WAIT,
    Call,
    DateLike,
    Flow,
    Sleep,
    _filters,
    _get,
    _listing,
    _model,
    _searched,
    _segment,
    _without_none,
)

# Workflows -------------------------------------------------------------------------------


def create_workflow(
    slug: str,
    name: str,
    graph: Mapping[str, Any],
    visibility: str | None = None,
    organization: str | None = None,
) -> Call[m.WorkflowDetail]:
    body = {"slug": slug, "name": name, "graph": dict(graph), "visibility": visibility}
    body |= _without_none(organization=organization)
    return Call("POST", "/workflows", _model(m.WorkflowDetail), json=body)


def update_workflow(slug: str, graph: Mapping[str, Any]) -> Call[m.WorkflowDetail]:
    return Call(
        "PUT", f"/workflows/{_segment(slug)}", _model(m.WorkflowDetail), json={"graph": graph}
    )


def validate_workflow(graph: Mapping[str, Any]) -> Call[m.WorkflowValidation]:
    return Call(
        "POST", "/workflows/validate", _model(m.WorkflowValidation), json={"graph": dict(graph)}
    )


def get_workflow(slug: str) -> Call[m.WorkflowDetail]:
    return _get(m.WorkflowDetail, "/workflows/{}", slug)


list_workflows = _searched("list_workflows", "/workflows", m.Workflow, "the slug or the name")


# Runs ------------------------------------------------------------------------------------


def start_run(
    slug: str, inputs: Mapping[str, Any] | None = None, refresh: bool = False
) -> Call[m.Run]:
    """Start a run; `refresh`: none of its jobs is answered from the result cache."""
    body: dict[str, Any] = {"inputs": dict(inputs or {})}
    if refresh:
        body["cache"] = "refresh"
    return Call("POST", f"/workflows/{_segment(slug)}/runs", _model(m.Run), json=body)


def cancel_run(run_id: str) -> Call[m.Run]:
    """Cancel a run: pending and running nodes cancelled, running jobs stopped."""
    return Call("POST", f"/workflow-runs/{_segment(run_id)}/cancel", _model(m.Run))


def rerun(
    run_id: str,
    start_from: str = "failure",
    workflow_version: str = "same",
    inputs: Mapping[str, Any] | None = None,
) -> Call[m.Run]:
    """A new run from a finished one: from `failure` (reusing what succeeded) or `start`, of
    the `same` or `latest` workflow version, with `inputs` overriding the original ones."""
    body = {"from": start_from, "workflow_version": workflow_version, "inputs": dict(inputs or {})}
    return Call("POST", f"/workflow-runs/{_segment(run_id)}/rerun", _model(m.Run), json=body)


def list_runs(
    limit: int | None = None,
    cursor: str | None = None,
    status: Sequence[str] = (),
    workflow: str | None = None,
    started_after: DateLike | None = None,
    started_before: DateLike | None = None,
) -> Call[m.Page[m.RunSummary]]:
    """`status`: any of them; `workflow`: its slug; `started_after` inclusive,
    `started_before` exclusive (a datetime, a date or ISO text)."""
    where = _filters(
        status=status, workflow=workflow, started_after=started_after, started_before=started_before
    )
    return _listing("/workflow-runs", m.RunSummary, limit, cursor, where)


def get_run(run_id: str) -> Call[m.Run]:
    return _get(m.Run, "/workflow-runs/{}", run_id)


def get_run_plan(run_id: str) -> Call[m.RunPlan]:
    return _get(m.RunPlan, "/workflow-runs/{}/plan", run_id)


def tick(run_id: str, wait: float | None = None) -> Call[m.Run]:
    """One advance; with `wait` the server first waits (up to 30 s) for a job of the run."""
    params = [] if not wait else [("wait", str(min(wait, MAX_TICK_WAIT)))]
    return Call(
        "POST",
        f"/workflow-runs/{_segment(run_id)}/tick",
        _model(m.Run),
        params=params,
        holds=min(wait or 0.0, MAX_TICK_WAIT),
    )


def run_until_done(
    run_id: str,
    on_update: Callable[[m.Run], None] | None = None,
    period: float = DEFAULT_PERIOD,
    long_poll: float | None = MAX_TICK_WAIT,
    timeout: float | None = None,
) -> Flow[m.Run]:
    """Tick until the run is terminal, calling `on_update` with every changed state.

    With `long_poll` (seconds) each tick first waits on the server for a job of the run to
    finish, so the run advances as soon as it can and nobody busy-polls; a tick that changed
    nothing is followed by a pause of up to `period`. With `long_poll=None` it ticks every
    `period` seconds, as the specification's run page does.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    last: tuple[Any, ...] | None = None
    while True:
        started = time.monotonic()
        run: m.Run = yield tick(run_id, wait=long_poll)
        key = (run.status, run.revision, tuple(sorted(_state_keys(run))))
        changed, last = key != last, key
        if changed and on_update is not None:
            on_update(run)
        if run.done:
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")
        pause = period if long_poll is None else period - (time.monotonic() - started)
        if long_poll is None or (not changed and pause > 0):
            yield Sleep(pause)


def _state_keys(run: m.Run) -> list[tuple[str, str, str | None]]:
    return [(key, s.status, s.job_id) for key, s in run.node_states.items()]
