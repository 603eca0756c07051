"""Workflow, version and run routes (spec: Workflows and runs; contract 4 and 5). Each route
parses, calls one service, serialises; the long-poll tick waits outside any transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.execution.waits import TICK_WAIT
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.state import RunStatus
from calcgraph.domain.runs.views import RunView
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowDetailView, WorkflowView
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation, PageQuery, Query
from calcgraph.rest_compat.responses import (
    Page,
    PlanOut,
    RunOut,
    RunSummaryOut,
    ValidateOut,
    WorkflowDetailOut,
    WorkflowOut,
)
from calcgraph.rest_compat.routes_execute import WAIT, seconds_param
from calcgraph.rest_compat.routes_packages import page_request
from calcgraph.rest_compat.schemas import CreateRunBody, CreateWorkflowBody, WorkflowGraphBody
from calcgraph.rest_compat.state import database_of, services_of


class RunsQuery(PageQuery):
    status: list[RunStatus] = Field(default=[], description="repeatable; any of these statuses")
    workflow: str | None = Field(default=None, description="a workflow slug")


class TickQuery(Query):
    wait: float = Field(
        default=TICK_WAIT.default,
        ge=0,
        le=TICK_WAIT.cap,
        description="first wait until a job of the run finishes or this many seconds pass",
    )
    since: int | None = Field(
        default=None,
        ge=0,
        description="a revision the caller holds: answer only the node states changed after it "
        "(and an empty plan_snapshot), so polling a big run costs what changed",
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def workflow_json(workflow: WorkflowView) -> dict[str, Any]:
    return {
        "id": workflow.id,
        "slug": workflow.slug,
        "name": workflow.name,
        "visibility": workflow.visibility,
        "owner": workflow.owner,
        "organization": workflow.organization,
        "latest_version": workflow.latest_version,
        "created_at": _iso(workflow.created_at),
        "updated_at": _iso(workflow.updated_at),
    }


def workflow_detail_json(detail: WorkflowDetailView) -> dict[str, Any]:
    version = detail.version
    return {
        **workflow_json(detail.workflow),
        "version": version.version,
        "version_id": version.id,
        "version_created_at": _iso(version.created_at),
        "graph": version.graph,
        "input_nodes": version.input_nodes(),
        "resolved_functions": version.resolved_functions,
    }


def run_summary_json(run: RunView) -> dict[str, Any]:
    return {
        "id": run.id,
        "workflow_id": run.workflow_id,
        "workflow_version_id": run.workflow_version_id,
        "status": run.status,
        "started_at": _iso(run.started_at),
        "completed_at": _iso(run.completed_at),
        "inputs": run.inputs,
        "terminal_outputs": run.terminal_outputs,
        "error_message": run.error_message,
        "first_failed_node_key": run.first_failed_node_key,
        "revision": run.revision,
    }


def node_states_json(run: RunView) -> dict[str, Any]:
    return {key: state.as_dict() for key, state in (run.node_states or {}).items()}


def run_json(run: RunView) -> dict[str, Any]:
    """WorkflowRunResponse (spec: Workflow run), plus `workflow_id` and `revision`; a tick
    asked with `since` adds it (its node_states are the changed ones)."""
    body = {
        **run_summary_json(run),
        "plan_snapshot": run.plan_snapshot,
        "node_states": node_states_json(run),
    }
    if run.since is not None:
        body["since"] = run.since
    return body


def plan_json(run: RunView) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "workflow_version_id": run.workflow_version_id,
        "status": run.status,
        "revision": run.revision,
        "plan": run.plan_snapshot,
        "node_states": node_states_json(run),
    }


def parse_tick_since(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not raw.isdigit():
        raise ValidationError(
            "since must be a revision of the run (an integer from 0)",
            [FieldError(("query", "since"), "expected an integer from 0")],
        )
    return int(raw)


async def list_workflows(request: Request) -> JSONResponse:
    principal = require_principal(request)
    page = page_request(request)
    async with database_of(request).read_session() as session:
        result = await workflow_service.list_workflows(session, principal, page)
    return JSONResponse(
        {"items": [workflow_json(w) for w in result.items], "next_cursor": result.next_cursor}
    )


async def create_workflow(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, CreateWorkflowBody)
    async with database_of(request).write_session() as session:
        detail = await workflow_service.create(
            session,
            principal,
            slug=body.slug,
            name=body.name,
            graph=body.graph,
            visibility=body.visibility,
            organization_slug=body.organization,
        )
    return JSONResponse(workflow_detail_json(detail), status_code=201)


async def validate_workflow(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, WorkflowGraphBody)
    async with database_of(request).read_session() as session:
        report = await workflow_service.validate_graph(session, principal, body.graph)
    return JSONResponse({"valid": report.valid, "report": report.as_dict()})


async def get_workflow(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        detail = await workflow_service.get(session, principal, request.path_params["slug"])
    return JSONResponse(workflow_detail_json(detail))


async def update_workflow(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, WorkflowGraphBody)
    async with database_of(request).write_session() as session:
        detail = await workflow_service.update(
            session, principal, request.path_params["slug"], body.graph
        )
    return JSONResponse(workflow_detail_json(detail))


async def create_run(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, CreateRunBody)
    async with database_of(request).write_session() as session:
        run = await run_service.create(session, principal, request.path_params["slug"], body.inputs)
    return JSONResponse(run_json(run), status_code=201)


async def list_runs(request: Request) -> JSONResponse:
    principal = require_principal(request)
    page = page_request(request)
    statuses = request.query_params.getlist("status")
    async with database_of(request).read_session() as session:
        result = await run_service.list_runs(
            session, principal, page, statuses, request.query_params.get("workflow")
        )
    return JSONResponse(
        {"items": [run_summary_json(r) for r in result.items], "next_cursor": result.next_cursor}
    )


async def get_run(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        run = await run_service.get(session, principal, request.path_params["run_id"])
    return JSONResponse(run_json(run))


async def get_plan(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        run = await run_service.get(session, principal, request.path_params["run_id"])
    return JSONResponse(plan_json(run))


async def tick_run(request: Request) -> JSONResponse:
    """`?wait=S` (up to 30): first wait until a job of the run finishes or S pass, then tick;
    without it the tick answers at once, as the specification says. `?since=N` (the
    `revision` of an earlier answer): only the node states changed after N, and no plan; a
    poller of a 10,000-node run gets what changed instead of the whole run each time."""
    principal = require_principal(request)
    run_id = request.path_params["run_id"]
    wait = seconds_param(request.query_params.get("wait") or None)
    since = parse_tick_since(request.query_params.get("since"))
    execution = services_of(request).execution
    run = await execution.tick(principal, run_id, wait, since=since, where=WAIT)
    return JSONResponse(run_json(run))


routes = [
    Route("/workflows", list_workflows, methods=["GET"]),
    Route("/workflows", create_workflow, methods=["POST"]),
    Route("/workflows/validate", validate_workflow, methods=["POST"]),
    Route("/workflows/{slug}", get_workflow, methods=["GET"]),
    Route("/workflows/{slug}", update_workflow, methods=["PUT"]),
    Route("/workflows/{slug}/runs", create_run, methods=["POST"]),
    Route("/workflow-runs", list_runs, methods=["GET"]),
    Route("/workflow-runs/{run_id}", get_run, methods=["GET"]),
    Route("/workflow-runs/{run_id}/plan", get_plan, methods=["GET"]),
    Route("/workflow-runs/{run_id}/tick", tick_run, methods=["POST"]),
]
_GRAPH_ERRORS = (400, 403, 404)
operations = [
    Operation(
        "GET",
        "/workflows",
        "Workflows the caller can see",
        {200: Page[WorkflowOut]},
        query=PageQuery,
        tag="workflows",
    ),
    Operation(
        "POST",
        "/workflows",
        "Create a workflow with its version 1 (422 or 400 with the validation report)",
        {201: WorkflowDetailOut},
        body=CreateWorkflowBody,
        errors=(*_GRAPH_ERRORS, 409),
        tag="workflows",
    ),
    Operation(
        "POST",
        "/workflows/validate",
        "Validate a graph without saving it",
        {200: ValidateOut},
        body=WorkflowGraphBody,
        errors=_GRAPH_ERRORS,
        tag="workflows",
    ),
    Operation(
        "GET",
        "/workflows/{slug}",
        "A workflow with its latest version",
        {200: WorkflowDetailOut},
        errors=(404,),
        tag="workflows",
    ),
    Operation(
        "PUT",
        "/workflows/{slug}",
        "Save a new latest version of a workflow's graph",
        {200: WorkflowDetailOut},
        body=WorkflowGraphBody,
        errors=_GRAPH_ERRORS,
        tag="workflows",
    ),
    Operation(
        "POST",
        "/workflows/{slug}/runs",
        "Start a run of the latest version",
        {201: RunOut},
        body=CreateRunBody,
        errors=(403, 404),
        tag="runs",
    ),
    Operation(
        "GET",
        "/workflow-runs",
        "The caller's runs",
        {200: Page[RunSummaryOut]},
        query=RunsQuery,
        errors=(404,),
        tag="runs",
    ),
    Operation("GET", "/workflow-runs/{run_id}", "A run", {200: RunOut}, errors=(404,), tag="runs"),
    Operation(
        "GET",
        "/workflow-runs/{run_id}/plan",
        "A run's plan and node states",
        {200: PlanOut},
        errors=(404,),
        tag="runs",
    ),
    Operation(
        "POST",
        "/workflow-runs/{run_id}/tick",
        "Advance a run: collect finished jobs, submit ready nodes",
        {200: RunOut},
        query=TickQuery,
        errors=(404, 409),
        tag="runs",
    ),
]
