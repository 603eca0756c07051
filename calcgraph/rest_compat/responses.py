"""Response bodies of the REST routes, as pydantic models: the OpenAPI document describes the
answers with them, and tests/openapi checks live answers against the document, so a serialiser
that drifts from its model is caught there."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from calcgraph.domain.runs.state import NodeStatus, RunStatus

Timestamp = str  # ISO 8601, UTC
T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: last")


class FieldErrorOut(BaseModel):
    loc: list[str | int] = Field(description='where, e.g. ["body", "graph", "nodes", 0]')
    msg: str


class Problem(BaseModel):
    node_key: str | None = None
    port: str | None = None
    reason: str


class ValidationReport(BaseModel):
    invalid_input_node_types: list[Problem]
    unknown_functions: list[Problem]
    untyped_functions: list[Problem]
    incompatible_edges: list[Problem]
    unbound_ports: list[Problem]
    cycles: list[Problem]


class ErrorBody(BaseModel):
    """Contract section 2: every error answer."""

    detail: str = Field(description="'<Kind>: <message>', e.g. 'NotFound: no such workflow'")
    errors: list[FieldErrorOut] | None = Field(default=None, description="422 only")
    report: ValidationReport | None = Field(default=None, description="workflow graph refusals")


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    """`degraded`: the database answers, Redis does not (jobs wait queued until it is back)."""
    database: str
    redis: Literal["ok", "unreachable"] | None = None
    """Only with `CALCGRAPH_REDIS_URL`."""
    version: str


class TypeOut(BaseModel):
    name: str
    parent: str | None
    kind: str
    unit: str | None
    shape: str | None
    description: str


class ConnectionOut(BaseModel):
    compatibility: Literal["ALLOWED", "REFUSED"]
    reason: str
    source: str = Field(description="the source expression, normalised")
    target: str = Field(description="the target expression, normalised")


class LoginStartOut(BaseModel):
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


class UserOut(BaseModel):
    id: str
    sub: str
    username: str
    email: str | None
    given_name: str | None
    family_name: str | None
    roles: list[str]
    created_at: Timestamp


class LoginResultOut(BaseModel):
    access_token: str
    token_type: str
    expires_in: int | None
    refresh_token: str | None
    id_token: str | None
    user: UserOut


class MemberOut(BaseModel):
    username: str
    role: Literal["member", "owner"]


class OrganizationOut(BaseModel):
    id: str
    slug: str
    name: str
    created_at: Timestamp
    members: list[MemberOut]


Visibility = Literal["private", "internal", "public"]


class PackageOut(BaseModel):
    id: str
    name: str
    visibility: Visibility
    owner: str
    organization: str | None
    description: str | None
    current_version: str | None
    created_at: Timestamp
    updated_at: Timestamp


class FunctionOut(BaseModel):
    id: str
    name: str
    package_id: str
    package: str
    current_version: str | None
    current_version_id: str | None
    created_at: Timestamp


class FunctionVersionOut(BaseModel):
    id: str
    function_id: str
    package_version_id: str
    version: str
    handler: str
    code_checksum: str
    inputs_schema: dict[str, Any] | None
    outputs_schema: dict[str, Any] | None
    typed: bool
    changelog: str | None
    is_breaking_change: bool
    deprecated: bool
    deprecated_message: str | None
    removal_version: str | None
    created_at: Timestamp
    deployed_at: Timestamp


class FunctionDetailOut(FunctionOut):
    current: FunctionVersionOut | None
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    typed: bool


class FunctionVersionEntryOut(BaseModel):
    version: str
    version_id: str
    deployed_at: Timestamp
    package_version: str
    package_version_id: str
    status: str
    changelog: str | None
    deprecated: bool
    deprecated_message: str | None
    is_breaking_change: bool


class FunctionVersionsOut(BaseModel):
    function: str
    function_id: str
    package: str
    package_id: str
    current_version: str | None
    current_version_id: str | None
    versions: list[FunctionVersionEntryOut]


class DeployedFunctionOut(BaseModel):
    name: str
    version: str
    version_id: str
    function_id: str
    status: str


class PackageVersionOut(BaseModel):
    id: str
    package_id: str
    version: str
    deployed_at: Timestamp
    created_at: Timestamp
    git_ref: str | None
    git_commit: str | None
    is_latest: bool
    is_stable: bool
    changelog: dict[str, Any] | None
    functions: list[DeployedFunctionOut]


class PackageVersionsOut(BaseModel):
    package: str
    package_id: str
    current_version: str | None
    versions: list[PackageVersionOut]


class FunctionDeploymentOut(BaseModel):
    id: str
    name: str
    version: str
    version_id: str
    checksum: str
    status: str
    changelog: str | None
    endpoint: str = Field(description="execute path pinned to this function version")
    is_breaking_change: bool
    breaking_reasons: list[str]
    deprecated: bool


class DeploymentReportOut(BaseModel):
    """Specification, Versioning 8, plus `package_id`."""

    package_id: str
    package: str
    package_version: str
    package_version_id: str
    is_latest: bool
    is_stable: bool
    git_ref: str | None
    git_commit: str | None
    functions: list[FunctionDeploymentOut]
    removed_functions: list[str]
    warnings: list[str]


class BuildOut(BaseModel):
    """The specification's build response, plus the identifiers a client needs next."""

    function_id: str
    status: str
    docker_image: str | None
    image_size: str
    build_time: str
    vulnerabilities: dict[str, Any]
    build_id: str
    function_version_id: str | None
    version: str | None
    version_status: str | None
    package_version: str | None
    log: str = Field(description="path of the build log")


JobStatus = Literal["queued", "running", "success", "failed"]


class JobErrorOut(BaseModel):
    kind: str = Field(description="user_error, timeout, out_of_memory, sandbox_error, ...")
    message: str


class JobOut(BaseModel):
    id: str
    function_id: str
    function_version_id: str
    package_id: str
    status: JobStatus
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: JobErrorOut | None
    logs: str | None = Field(description="captured stdout and stderr, truncated to 64 KiB")
    cache_hit: bool
    workflow_run_id: str | None
    node_key: str | None
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None


class ExecuteOut(BaseModel):
    """200 when the job ended within `wait` (outputs or error), else 202 (queued or running)."""

    job_id: str
    status: JobStatus
    outputs: dict[str, Any] | None = None
    error: JobErrorOut | None = None


class WorkflowOut(BaseModel):
    id: str
    slug: str
    name: str
    visibility: Visibility
    owner: str
    organization: str | None
    latest_version: int
    created_at: Timestamp
    updated_at: Timestamp


class InputNodeOut(BaseModel):
    node_key: str
    type_expr: str | dict[str, Any] | None


class WorkflowDetailOut(WorkflowOut):
    version: int
    version_id: str
    version_created_at: Timestamp
    graph: dict[str, Any] = Field(description="the graph document (contract 5)")
    input_nodes: list[InputNodeOut]
    resolved_functions: dict[str, Any] = Field(description="node_key to the pinned version")


class ValidateOut(BaseModel):
    valid: bool
    report: ValidationReport


class NodeStateOut(BaseModel):
    status: NodeStatus
    job_id: str | None
    outputs: dict[str, Any] | None
    error: JobErrorOut | None
    attempt: int
    started_at: Timestamp | None
    finished_at: Timestamp | None


class RunSummaryOut(BaseModel):
    id: str
    workflow_id: str
    workflow_version_id: str
    status: RunStatus
    started_at: Timestamp
    completed_at: Timestamp | None
    inputs: dict[str, Any]
    terminal_outputs: dict[str, Any] | None
    error_message: str | None
    first_failed_node_key: str | None
    revision: int


class RunOut(RunSummaryOut):
    plan_snapshot: dict[str, Any] = Field(
        description="chains, waves and nodes (contract 5); empty in a tick asked with `since`"
    )
    node_states: dict[str, NodeStateOut] = Field(
        description="every function and extract node; in a tick asked with `since`, only "
        "those changed after that revision"
    )
    since: int | None = Field(
        default=None, description="the `since` of a tick asked with it: node_states is partial"
    )


class PlanOut(BaseModel):
    run_id: str
    workflow_version_id: str
    status: RunStatus
    revision: int
    plan: dict[str, Any]
    node_states: dict[str, NodeStateOut]
