"""Typed answers of the REST API, generated from /openapi.json by scripts/client_models.py
(do not edit: change the server's wire models and run it). Every model keeps the fields it
does not name (`model_base.Model`), so a newer server never breaks an older client."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, Field

from calcgraph.client.model_base import CompatibilityModel, JobModel, Model, RunModel
from calcgraph.client.model_base import Page as Page


class Compatibility(CompatibilityModel):
    compatibility: str
    reason: str
    source: str = Field(..., description="the source expression, normalised")
    target: str = Field(..., description="the target expression, normalised")


class Delivery(Model):
    event_id: str
    type: str
    attempt: int
    status_code: int | None
    error: str | None
    duration_ms: int | None
    attempted_at: AwareDatetime | None
    state: str = Field(..., description="delivered, retrying, failed (pending: not tried yet)")
    next_attempt_at: AwareDatetime | None


class DeploymentReport(Model):
    """
    Specification, Versioning 8, plus `package_id`.
    """

    package_id: str
    package: str
    package_version: str
    package_version_id: str
    is_latest: bool
    is_stable: bool
    git_ref: str | None
    git_commit: str | None
    functions: list[FunctionDeployment]
    removed_functions: list[str]
    warnings: list[str]
    breaking_changes: list[dict[str, Any]]
    dependencies: dict[str, str]
    dependency_closure: dict[str, str]


class Event(Model):
    """
    A CloudEvents 1.0 event in structured mode.
    """

    specversion: str = Field(..., description='"1.0"')
    id: str = Field(..., description="unique; the same on every delivery of the event")
    source: str = Field(..., description='"calcgraph"')
    type: str = Field(..., description="e.g. calcgraph.job.failed")
    subject: str = Field(..., description="the id of what the event is about")
    time: AwareDatetime = Field(..., description="RFC 3339, UTC")
    datacontenttype: str = Field(..., description='"application/json"')
    data: dict[str, Any]


class EventPage(Model):
    items: list[Event]
    next_cursor: str = Field(..., description="pass as `after` for the next call; never null")


class ExecuteResult(JobModel):
    """
    200 when the job ended within `wait` (outputs or error), else 202 (queued or running).
    """

    job_id: str
    status: str
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] | None = Field(
        [], description="present when the function version is deprecated (contract 11)"
    )


class Function(Model):
    id: str
    name: str
    package_id: str
    package: str
    current_version: str | None
    current_version_id: str | None
    created_at: AwareDatetime


class FunctionDeployment(Model):
    id: str
    name: str
    version: str
    version_id: str
    checksum: str
    status: str
    changelog: str | None
    endpoint: str = Field(..., description="execute path pinned to this function version")
    is_breaking_change: bool
    breaking_reasons: list[str]
    deprecated: bool


class FunctionDetail(Function):
    current: dict[str, Any] | None
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    typed: bool


class Health(Model):
    status: str
    database: str
    version: str
    redis: str | None = None


class InterfaceChange(Model):
    function: str
    change: str
    port: str | None = None
    breaking: bool
    reason: str


class Job(JobModel):
    id: str
    function_id: str
    function_version_id: str
    package_id: str
    status: str
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    logs: str | None = Field(..., description="captured stdout and stderr, truncated to 64 KiB")
    cache_hit: bool
    workflow_run_id: str | None
    node_key: str | None
    created_at: AwareDatetime
    started_at: AwareDatetime | None
    finished_at: AwareDatetime | None
    outputs_omitted: bool
    inputs_omitted: bool


class LoginResult(Model):
    access_token: str
    token_type: str
    expires_in: int | None
    refresh_token: str | None
    id_token: str | None
    user: User


class LoginStart(Model):
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


class Member(Model):
    username: str
    role: str


class NodeState(Model):
    status: str
    job_id: str | None
    outputs: dict[str, Any] | None
    outputs_omitted: bool = Field(
        False,
        description="the outputs are over 64 KiB or past the answer's 16 MiB and left out: GET /jobs/{job_id} reads them",
    )
    error: dict[str, Any] | None
    attempt: int
    started_at: AwareDatetime | None
    finished_at: AwareDatetime | None
    retry_at: AwareDatetime | None = Field(
        None, description="a retried node's next attempt is submitted at or after it"
    )
    attempts: list[dict[str, Any]] = Field(
        [], description="earlier attempts that failed and were retried"
    )
    reused: bool = Field(False, description="a re-run's node that took the original run's result")


class Organization(Model):
    id: str
    slug: str
    name: str
    created_at: AwareDatetime
    members: list[Member]


class Package(Model):
    id: str
    name: str
    visibility: str
    owner: str
    organization: str | None
    description: str | None
    current_version: str | None
    created_at: AwareDatetime
    updated_at: AwareDatetime


class PackageDiff(Model):
    package: str
    from_version: str
    to_version: str
    changes: list[InterfaceChange]


class Quotas(Model):
    runs: int
    nodes: int
    queued_jobs: int
    stored_bytes: int


class RunPlan(Model):
    run_id: str
    workflow_version_id: str
    status: str
    revision: int
    plan: dict[str, Any]
    node_states: dict[str, NodeState]


class RunSummary(RunModel):
    id: str
    workflow_id: str
    workflow_version_id: str
    status: str
    started_at: AwareDatetime
    completed_at: AwareDatetime | None
    inputs: dict[str, Any]
    terminal_outputs: dict[str, Any] | None
    error_message: str | None
    first_failed_node_key: str | None
    revision: int
    rerun_of: str | None = Field(None, description="the run this one re-runs")
    retry_at: AwareDatetime | None = Field(
        None, description="the earliest retry of its nodes still to be submitted"
    )
    terminal_outputs_omitted: bool = Field(
        False,
        description="a listing left terminal_outputs out (over 64 KiB), or a run's answer did (past its 16 MiB): GET /workflow-runs/{id} reads them when they fit, else each node's job (GET /jobs/{job_id})",
    )


class Run(RunSummary):
    """
    WorkflowRunResponse (spec: Workflow run), plus `workflow_id` and `revision`.
    """

    plan_snapshot: dict[str, Any] = Field(
        ...,
        description="chains, waves and nodes (contract 5); empty in a tick asked with `since`",
    )
    node_states: dict[str, NodeState] = Field(
        ...,
        description="every function and extract node; in a tick asked with `since`, only those changed after that revision",
    )
    since: int | None = Field(
        None, description="the `since` of a tick asked with it: node_states is partial"
    )


class UsageReport(Model):
    items: list[UserUsage]
    limits: Quotas


class User(Model):
    id: str
    sub: str
    username: str
    email: str | None
    given_name: str | None
    family_name: str | None
    roles: list[str]
    created_at: AwareDatetime


class UserUsage(Model):
    user_id: str
    username: str
    unfinished_runs: int
    jobs: int
    queued_jobs: int
    stored_bytes: int
    largest_workflow_nodes: int


class Webhook(Model):
    id: str
    url: str
    types: list[str]
    description: str
    enabled: bool
    created_at: AwareDatetime
    secret: str | None = None


class Workflow(Model):
    id: str
    slug: str
    name: str
    visibility: str
    owner: str
    organization: str | None
    latest_version: int
    created_at: AwareDatetime
    updated_at: AwareDatetime


class WorkflowDetail(Workflow):
    version: int
    version_id: str
    version_created_at: AwareDatetime
    graph: dict[str, Any] = Field(..., description="the graph document (contract 5)")
    input_nodes: list[dict[str, Any]]
    resolved_functions: dict[str, Any] = Field(..., description="node_key to the pinned version")


class WorkflowValidation(Model):
    valid: bool
    report: dict[str, Any]
