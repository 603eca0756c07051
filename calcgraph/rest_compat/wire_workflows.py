"""Bodies and answers of the workflow and run routes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from calcgraph.domain.runs.state import NodeStatus, RunStatus
from calcgraph.domain.workflows.validation import Report
from calcgraph.domain.workflows.views import WorkflowDetailView
from calcgraph.rest_compat.wire import (
    Body,
    OrganizationSlug,
    Out,
    TimestampZ,
    ValidationReport,
    Visibility,
    VisibilityValue,
    is_none,
    read_from,
    view_attributes,
)
from calcgraph.rest_compat.wire_jobs import JobErrorOut

_GRAPH_EXAMPLE: dict[str, Any] = {
    "nodes": [
        {"node_key": "span", "kind": "input", "input_spec": {"type_expr": "Length"}},
        {"node_key": "load", "kind": "input", "input_spec": {"type_expr": "Force"}},
        {
            "node_key": "beam",
            "kind": "function",
            "function": "beam-tools/cantilever",
            "input_bindings": {
                "length": {"source": "input_node", "input_key": "span", "from_port": "value"},
                "force": {"source": "input_node", "input_key": "load", "from_port": "value"},
            },
        },
    ]
}


class CreateWorkflowBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"slug": "cantilever-check", "name": "Cantilever check", "graph": _GRAPH_EXAMPLE}
            ]
        }
    )

    slug: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9-]*$",
        description="lowercase, digits, dashes",
    )
    name: str = Field(min_length=1, max_length=255, description="display name")
    graph: dict[str, Any] = Field(description='the graph document {"nodes": [...]}')
    visibility: VisibilityValue | None = Field(default=None, description="default private")
    organization: OrganizationSlug = None


class WorkflowGraphBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"graph": _GRAPH_EXAMPLE}]})

    graph: dict[str, Any] = Field(description='the graph document {"nodes": [...]}')


class CreateRunBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"inputs": {"span": 2.0, "load": {"value": 12, "unit": "kN"}}}]
        }
    )

    inputs: dict[str, Any] = Field(
        default={}, description="input node_key to a value matching its type_expr"
    )
    cache: Literal["refresh"] | None = Field(
        default=None,
        description="`refresh`: no job of the run is answered from the result cache; each "
        "stores its new result (contract 10)",
    )


class RerunBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"from": "failure", "inputs": {"span": 2.5}}]},
        populate_by_name=True,
    )

    start_from: Literal["failure", "start"] = Field(
        default="failure",
        alias="from",
        description="failure: nodes that succeeded with the same function version and inputs "
        "are reused; start: every node runs again",
    )
    workflow_version: Literal["same", "latest"] = Field(
        default="same", description="the original run's workflow version, or the latest"
    )
    inputs: dict[str, Any] = Field(
        default={}, description="overrides of the original run's inputs, by input node_key"
    )


class WorkflowOut(Out):
    id: str
    slug: str
    name: str
    visibility: Visibility
    owner: str
    organization: str | None
    latest_version: int
    created_at: TimestampZ
    updated_at: TimestampZ


class InputNodeOut(Out):
    node_key: str
    type_expr: str | dict[str, Any] | None


def _workflow_detail(detail: WorkflowDetailView) -> dict[str, Any]:
    version = detail.version
    return {
        **view_attributes(detail.workflow),
        "version": version.version,
        "version_id": version.id,
        "version_created_at": version.created_at,
        "graph": version.graph,
        "input_nodes": version.input_nodes(),
        "resolved_functions": version.resolved_functions,
    }


class WorkflowDetailOut(WorkflowOut):
    version: int
    version_id: str
    version_created_at: TimestampZ
    graph: dict[str, Any] = Field(description="the graph document (contract 5)")
    input_nodes: list[InputNodeOut]
    resolved_functions: dict[str, Any] = Field(description="node_key to the pinned version")

    _from_view = read_from(WorkflowDetailView, _workflow_detail)


class ValidateOut(Out):
    valid: bool
    report: ValidationReport

    _from_report = read_from(Report, lambda report: {"valid": report.valid, "report": report})


class AttemptOut(Out):
    attempt: int
    job_id: str | None
    error: JobErrorOut | None


class NodeStateOut(Out):
    status: NodeStatus
    job_id: str | None
    outputs: dict[str, Any] | None
    outputs_omitted: bool = Field(
        default=False,
        description="the outputs are over 64 KiB or past the answer's 16 MiB and left out: "
        "GET /jobs/{job_id} reads them",
    )
    error: JobErrorOut | None
    attempt: int
    started_at: TimestampZ | None
    finished_at: TimestampZ | None
    retry_at: TimestampZ | None = Field(
        default=None, description="a retried node's next attempt is submitted at or after it"
    )
    attempts: list[AttemptOut] = Field(
        default=[], description="earlier attempts that failed and were retried"
    )
    reused: bool = Field(
        default=False, description="a re-run's node that took the original run's result"
    )


def _no_states(value: object) -> object:
    return {} if value is None else value


NodeStates = Annotated[dict[str, NodeStateOut], BeforeValidator(_no_states)]


class RunSummaryOut(Out):
    id: str
    workflow_id: str
    workflow_version_id: str
    status: RunStatus
    started_at: TimestampZ
    completed_at: TimestampZ | None
    inputs: dict[str, Any]
    terminal_outputs: dict[str, Any] | None
    error_message: str | None
    first_failed_node_key: str | None
    revision: int
    rerun_of: str | None = Field(default=None, description="the run this one re-runs")
    retry_at: TimestampZ | None = Field(
        default=None, description="the earliest retry of its nodes still to be submitted"
    )
    terminal_outputs_omitted: bool = Field(
        default=False,
        description="a listing left terminal_outputs out (over 64 KiB), or a run's answer did "
        "(past its 16 MiB): GET /workflow-runs/{id} reads them when they fit, else each node's "
        "job (GET /jobs/{job_id})",
    )


class RunOut(RunSummaryOut):
    """WorkflowRunResponse (spec: Workflow run), plus `workflow_id` and `revision`."""

    plan_snapshot: dict[str, Any] = Field(
        description="chains, waves and nodes (contract 5); empty in a tick asked with `since`"
    )
    node_states: NodeStates = Field(
        description="every function and extract node; in a tick asked with `since`, only "
        "those changed after that revision"
    )
    since: int | None = Field(
        default=None,
        exclude_if=is_none,
        description="the `since` of a tick asked with it: node_states is partial",
    )


class PlanOut(Out):
    run_id: str = Field(validation_alias="id")
    workflow_version_id: str
    status: RunStatus
    revision: int
    plan: dict[str, Any] = Field(validation_alias="plan_snapshot")
    node_states: NodeStates
