"""Workflow, version and run routes (spec: Workflows and runs; contract 4 and 5). Each route
parses, calls one service, serialises; the long-poll tick waits outside any transaction."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from starlette.responses import Response

from calcgraph.domain.commit_wait.waits import TICK_WAIT
from calcgraph.domain.listing.paging import Page
from calcgraph.domain.runs.control.service import run_control
from calcgraph.domain.runs.service import RUN_STATUSES, run_service
from calcgraph.domain.runs.state import RunStatus
from calcgraph.domain.runs.views import RunView, shown
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.validation import Report
from calcgraph.domain.workflows.views import WorkflowDetailView, WorkflowView
from calcgraph.rest_compat.operations import Call, Operations, serialiser, written
from calcgraph.rest_compat.parsing import BlankIsAbsent, Query, Refusal
from calcgraph.rest_compat.routes_execute import WAIT
from calcgraph.rest_compat.wire import INSTANT_HELP, PageQuery, SearchQuery
from calcgraph.rest_compat.wire import Page as PageOut
from calcgraph.rest_compat.wire_workflows import (
    CreateRunBody,
    CreateWorkflowBody,
    PlanOut,
    RerunBody,
    RunOut,
    RunSummaryOut,
    ValidateOut,
    WorkflowDetailOut,
    WorkflowGraphBody,
    WorkflowOut,
)


class RunsQuery(PageQuery):
    status: Annotated[
        list[RunStatus],
        Refusal("unknown run status {value!r}", f"one of {', '.join(RUN_STATUSES)}"),
    ] = Field(default=[], description="repeatable; any of these statuses")
    workflow: str | None = Field(default=None, description="a workflow slug")
    started_after: str | None = Field(default=None, description=f"inclusive; {INSTANT_HELP}")
    started_before: str | None = Field(default=None, description=f"exclusive; {INSTANT_HELP}")


class TickQuery(Query):
    wait: Annotated[
        float,
        BlankIsAbsent,
        Refusal(TICK_WAIT.message, TICK_WAIT.expected),
    ] = Field(
        # The bound is the execution service's: a longer wait is served as the longest one
        # rather than refused.
        default=TICK_WAIT.default,
        ge=TICK_WAIT.low,
        allow_inf_nan=False,
        json_schema_extra={"maximum": TICK_WAIT.cap},
        description="first wait until a job of the run finishes or this many seconds pass",
    )
    since: Annotated[
        int | None,
        BlankIsAbsent,
        Refusal(
            "since must be a revision of the run (an integer from 0)", "expected an integer from 0"
        ),
    ] = Field(
        default=None,
        ge=0,
        description="a revision the caller holds: answer only the node states changed after it "
        "(and an empty plan_snapshot), so polling a big run costs what changed",
    )


rest = Operations(tag="workflows")
_GRAPH_ERRORS = (400, 403, 404)


@rest("GET", "/workflows", {200: PageOut[WorkflowOut]})
async def list_workflows(call: Call[None, SearchQuery]) -> Page[WorkflowView]:
    """Workflows the caller can see

    `search` matches a part of the slug or the name."""
    query = call.query
    return await call.read(workflow_service.list_workflows, query.page(), search=query.search)


@rest("POST", "/workflows", {201: WorkflowDetailOut}, errors=(*_GRAPH_ERRORS, 409))
async def create_workflow(call: Call[CreateWorkflowBody, None]) -> WorkflowDetailView:
    """Create a workflow with its version 1 (422 or 400 with the validation report)"""
    body = call.body
    return await call.staged(
        workflow_service.create,
        slug=body.slug,
        name=body.name,
        graph=body.graph,
        visibility=body.visibility,
        organization_slug=body.organization,
        quotas=call.services.settings.quotas,
    )


@rest("POST", "/workflows/validate", {200: ValidateOut}, errors=_GRAPH_ERRORS)
async def validate_workflow(call: Call[WorkflowGraphBody, None]) -> Report:
    """Validate a graph without saving it"""
    return await call.staged(workflow_service.validate_graph, call.body.graph)


@rest("GET", "/workflows/{slug}", {200: WorkflowDetailOut})
async def get_workflow(call: Call[None, None]) -> WorkflowDetailView:
    """A workflow with its latest version"""
    return await call.read(workflow_service.get, call.path("slug"))


@rest("PUT", "/workflows/{slug}", {200: WorkflowDetailOut}, errors=_GRAPH_ERRORS)
async def update_workflow(call: Call[WorkflowGraphBody, None]) -> WorkflowDetailView:
    """Save a new latest version of a workflow's graph"""
    return await call.staged(
        workflow_service.update,
        call.path("slug"),
        call.body.graph,
        quotas=call.services.settings.quotas,
    )


@rest("POST", "/workflows/{slug}/runs", {201: RunOut}, errors=(403,), tag="runs")
async def create_run(call: Call[CreateRunBody, None]) -> RunView:
    """Start a run of the latest version"""
    return shown(
        await call.staged(
            run_service.create,
            call.path("slug"),
            call.body.inputs,
            refresh=call.body.cache == "refresh",
            quotas=call.services.settings.quotas,
        )
    )


@rest("POST", "/workflow-runs/{run_id}/cancel", {200: RunOut}, errors=(403, 409), tag="runs")
async def cancel_run(call: Call[None, None]) -> RunView:
    """Cancel a run: pending and running nodes cancelled, running jobs stopped (409: it ended)"""
    return shown(await call.write(run_control.cancel_run, call.path("run_id")))


@rest(
    "POST",
    "/workflow-runs/{run_id}/rerun",
    {201: RunOut},
    errors=(403, 409),
    tag="runs",
    body_required=False,
)
async def rerun_run(call: Call[RerunBody, None]) -> RunView:
    """Start a new run from a finished one, reusing what succeeded (409: it has not ended)"""
    body = call.body
    return shown(
        await call.write(
            run_control.rerun,
            call.path("run_id"),
            start_from=body.start_from,
            workflow_version=body.workflow_version,
            inputs=body.inputs,
        )
    )


@rest("GET", "/workflow-runs", {200: PageOut[RunSummaryOut]}, errors=(404,), tag="runs")
async def list_runs(call: Call[None, RunsQuery]) -> Page[RunView]:
    """The caller's runs"""
    query = call.query
    return await call.read(
        run_service.list_runs,
        query.page(),
        query.status,
        query.workflow,
        started_after=query.started_after,
        started_before=query.started_before,
    )


@rest("GET", "/workflow-runs/{run_id}", {200: RunOut}, tag="runs")
async def get_run(call: Call[None, None]) -> RunView:
    """A run"""
    return shown(await call.read(run_service.get, call.path("run_id")))


@rest("GET", "/workflow-runs/{run_id}/plan", {200: PlanOut}, tag="runs")
async def get_plan(call: Call[None, None]) -> RunView:
    """A run's plan and node states"""
    return shown(await call.read(run_service.get, call.path("run_id")))


_RUN_JSON = serialiser(RunOut)
KEPT_JSON_MAX_BYTES = 256 * 1024
"""A tick's answer up to this size is kept written with its view (`RunView.encoded`)."""


async def _run_json(view: RunView) -> bytes:
    """The view as a tick answers it (`shown`, then RunOut's JSON), written once per view: a
    tick that changed nothing answers the view a tick kept (`RunService.kept`), the same
    object until the run changes, and its polled ticks answer these bytes without validating
    and writing the view again. Kept only up to `KEPT_JSON_MAX_BYTES`: the memo's bounds count
    nodes, not bytes."""
    found = view.encoded.get("rest")
    if found is not None:
        return found
    body = await written(shown(view), _RUN_JSON)
    if len(body) <= KEPT_JSON_MAX_BYTES:
        view.encoded["rest"] = body
    return body


@rest("POST", "/workflow-runs/{run_id}/tick", {200: RunOut}, errors=(409,), tag="runs")
async def tick_run(call: Call[None, TickQuery]) -> Response:
    """Advance a run: collect finished jobs, submit ready nodes

    `?wait=S` (up to 30): first wait until a job of the run finishes or S pass, then tick;
    without it the tick answers at once, as the specification says. `?since=N` (the
    `revision` of an earlier answer): only the node states changed after N, and no plan; a
    poller of a 10,000-node run gets what changed instead of the whole run each time."""
    execution = call.services.execution
    view = await execution.tick(
        call.principal, call.path("run_id"), call.query.wait, since=call.query.since, where=WAIT
    )
    return Response(await _run_json(view), media_type="application/json")
