"""Response bodies of the REST routes, as pydantic models. Each is both the answer's
serialiser (it reads the domain's view by attribute; an alias names the view's attribute where
the wire name differs) and its OpenAPI schema; tests/openapi checks live answers against the
document."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args, get_origin, get_type_hints

from pydantic import (
    AliasPath,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from calcgraph.domain.builds.service import BuildOutcome
from calcgraph.domain.builds.submission import format_duration, format_size
from calcgraph.domain.functions.views import (
    FunctionDetailView,
    FunctionVersionEntry,
    FunctionVersionView,
    FunctionView,
)
from calcgraph.domain.jobs.views import Executed, JobView
from calcgraph.domain.packages.views import DeploymentReport
from calcgraph.domain.runs.state import NodeStatus, RunStatus
from calcgraph.domain.workflows.validation import Report
from calcgraph.domain.workflows.views import WorkflowDetailView

T = TypeVar("T")

_DATE_TIME = WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization")
Timestamp = Annotated[
    datetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json"), _DATE_TIME
]
"""ISO 8601 with its offset, `2026-01-02T03:04:05+00:00` (jobs, packages, functions, users,
organizations)."""
TimestampZ = Annotated[datetime, _DATE_TIME]
"""ISO 8601 in UTC written `Z`, `2026-01-02T03:04:05Z` (workflows, runs, node states)."""


def _is_none(value: object) -> bool:
    return value is None


def _wire(hint: Any) -> Any:
    """A view's field type as the answer writes it: a datetime as `Timestamp`, a tuple as a
    list."""
    if hint is datetime:
        return Timestamp
    if isinstance(hint, UnionType):
        wired = [_wire(arg) for arg in get_args(hint)]
        union = wired[0]
        for arg in wired[1:]:
            union = union | arg
        return union
    if get_origin(hint) is tuple:
        return list[get_args(hint)[0]]  # type: ignore[misc]
    return hint


def as_viewed(view: type, *, exclude: tuple[str, ...] = (), **types: Any) -> dict[str, Any]:
    """The fields of an answer that writes a dataclass view as it is: the view's fields in its
    order and with its types (`_wire`), but for those `types` gives and those left out. Assign
    it to the model's `__annotations__`, so the view stays the one declaration of the fields."""
    hints = get_type_hints(view)
    return {
        f.name: types.get(f.name, _wire(hints[f.name]))
        for f in fields(view)
        if f.name not in exclude
    }


def _attributes(view: object) -> dict[str, Any]:
    """A dataclass view's fields, shallow, to merge with another view's."""
    return {f.name: getattr(view, f.name) for f in fields(view)}  # type: ignore[arg-type]


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page(Out, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: last")


class FieldErrorOut(Out):
    loc: list[str | int] = Field(description='where, e.g. ["body", "graph", "nodes", 0]')
    msg: str


class Problem(Out):
    model_config = ConfigDict(extra="allow")

    node_key: str | None = None
    port: str | None = Field(default=None, exclude_if=_is_none)
    index: int | None = Field(
        default=None, exclude_if=_is_none, description="position in `nodes`, where it helps"
    )
    reason: str


class ValidationReport(Out):
    """Every category, empty ones included (contract 2)."""

    invalid_input_node_types: list[Problem]
    unknown_functions: list[Problem]
    untyped_functions: list[Problem]
    incompatible_edges: list[Problem]
    unbound_ports: list[Problem]
    cycles: list[Problem]
    duplicate_node_keys: list[Problem]
    invalid_nodes: list[Problem]
    unknown_sources: list[Problem]
    unknown_ports: list[Problem]
    duplicate_bindings: list[Problem]
    invalid_retry_policies: list[Problem]
    deprecated_functions: list[Problem] = Field(
        default_factory=list,
        description="nodes on deprecated function versions: a notice, the graph stays valid",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_report(cls, value: Any) -> Any:
        return value.as_dict() if isinstance(value, Report) else value


class ErrorBody(Out):
    """Contract section 2: every error answer (written by rest_compat.errors)."""

    detail: str = Field(description="'<Kind>: <message>', e.g. 'NotFound: no such workflow'")
    errors: list[FieldErrorOut] | None = Field(default=None, description="422 only")
    report: ValidationReport | None = Field(default=None, description="workflow graph refusals")


class Health(Out):
    status: Literal["ok", "degraded", "unavailable"]
    """`degraded`: the database answers, Redis does not (jobs wait queued until it is back)."""
    database: str
    version: str
    redis: Literal["ok", "unreachable"] | None = Field(default=None, exclude_if=_is_none)
    """Only with `CALCGRAPH_REDIS_URL`."""


class TypeOut(Out):
    name: str
    parent: str | None
    kind: str
    unit: str | None = Field(validation_alias="unit_symbol")
    shape: str | None
    description: str


class ConnectionOut(Out):
    compatibility: Literal["ALLOWED", "REFUSED"] = Field(
        validation_alias=AliasPath("compatibility", "verdict")
    )
    reason: str = Field(validation_alias=AliasPath("compatibility", "reason"))
    source: str = Field(description="the source expression, normalised")
    target: str = Field(description="the target expression, normalised")


class LoginStartOut(Out):
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


class UserOut(Out):
    id: str
    sub: str = Field(validation_alias="subject")
    username: str
    email: str | None
    given_name: str | None
    family_name: str | None
    roles: list[str]
    created_at: Timestamp


class LoginResultOut(Out):
    access_token: str
    token_type: str
    expires_in: int | None
    refresh_token: str | None
    id_token: str | None
    user: UserOut


class MemberOut(Out):
    username: str
    role: Literal["member", "owner"]


class OrganizationOut(Out):
    id: str
    slug: str
    name: str
    created_at: Timestamp
    members: list[MemberOut]


Visibility = Literal["private", "internal", "public"]


class PackageOut(Out):
    id: str
    name: str
    visibility: Visibility
    owner: str
    organization: str | None
    description: str | None
    current_version: str | None
    created_at: Timestamp
    updated_at: Timestamp


class FunctionOut(Out):
    __annotations__ = as_viewed(FunctionView)


class FunctionVersionOut(Out):
    __annotations__ = as_viewed(FunctionVersionView)


class FunctionDetailOut(FunctionOut):
    current: FunctionVersionOut | None
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    typed: bool

    @model_validator(mode="before")
    @classmethod
    def _from_view(cls, value: Any) -> Any:
        if not isinstance(value, FunctionDetailView):
            return value
        current = value.current
        return {
            **_attributes(value.function),
            "current": current,
            "inputs": current.inputs_schema if current is not None else None,
            "outputs": current.outputs_schema if current is not None else None,
            "typed": current.typed if current is not None else False,
        }


class FunctionVersionEntryOut(Out):
    __annotations__ = as_viewed(FunctionVersionEntry)


class FunctionVersionsOut(Out):
    function: str = Field(validation_alias=AliasPath("function", "name"))
    function_id: str = Field(validation_alias=AliasPath("function", "id"))
    package: str = Field(validation_alias=AliasPath("function", "package"))
    package_id: str = Field(validation_alias=AliasPath("function", "package_id"))
    current_version: str | None = Field(validation_alias=AliasPath("function", "current_version"))
    current_version_id: str | None = Field(
        validation_alias=AliasPath("function", "current_version_id")
    )
    versions: list[FunctionVersionEntryOut]


class DeployedFunctionOut(Out):
    name: str
    version: str
    version_id: str
    function_id: str
    status: str


class PackageVersionOut(Out):
    id: str
    package_id: str
    version: str
    deployed_at: Timestamp = Field(validation_alias=AliasPath("created_at"))
    created_at: Timestamp
    git_ref: str | None
    git_commit: str | None
    is_latest: bool
    is_stable: bool
    changelog: dict[str, Any] | None
    functions: list[DeployedFunctionOut]


class PackageVersionsOut(Out):
    package: str = Field(validation_alias=AliasPath("package", "name"))
    package_id: str = Field(validation_alias=AliasPath("package", "id"))
    current_version: str | None = Field(validation_alias=AliasPath("package", "current_version"))
    versions: list[PackageVersionOut]


class FunctionDeploymentOut(Out):
    id: str = Field(validation_alias="function_id")
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


class DeploymentReportOut(Out):
    """Specification, Versioning 8, plus `package_id`."""

    __annotations__ = as_viewed(DeploymentReport, functions=list[FunctionDeploymentOut])


class BuildOut(Out):
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

    @model_validator(mode="before")
    @classmethod
    def _from_outcome(cls, value: Any) -> Any:
        if not isinstance(value, BuildOutcome):
            return value
        return {
            **_attributes(value),
            "image_size": format_size(value.image_size_bytes or 0),
            "build_time": format_duration(value.build_seconds),
            "log": f"/functions/{value.function_id}/builds/{value.build_id}/log",
        }


JobStatus = Literal["queued", "running", "success", "failed"]


class JobErrorOut(Out):
    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="user_error, timeout, out_of_memory, sandbox_error, ...")
    message: str


class JobOut(Out):
    __annotations__ = as_viewed(
        JobView,
        exclude=("user_id",),
        status=JobStatus,
        error=JobErrorOut | None,
        logs=Annotated[
            str | None, Field(description="captured stdout and stderr, truncated to 64 KiB")
        ],
    )


class ExecuteOut(Out):
    """200 when the job ended within `wait` (outputs or error), else 202 (queued or running)."""

    job_id: str
    status: JobStatus
    outputs: dict[str, Any] | None = Field(default=None, exclude_if=_is_none)
    error: JobErrorOut | None = Field(default=None, exclude_if=_is_none)
    warnings: list[str] | None = Field(
        default=None,
        exclude_if=_is_none,
        description="present when the function version is deprecated (contract 11)",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_job(cls, value: Any) -> Any:
        warnings: tuple[str, ...] = ()
        if isinstance(value, Executed):
            value, warnings = value.job, value.warnings
        if not isinstance(value, JobView):
            return value
        body: dict[str, Any] = {"job_id": value.id, "status": value.status}
        if value.status == "success":
            body["outputs"] = value.outputs
        elif value.status == "failed":
            body["error"] = value.error
        if warnings:
            body["warnings"] = list(warnings)
        return body


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


class WorkflowDetailOut(WorkflowOut):
    version: int
    version_id: str
    version_created_at: TimestampZ
    graph: dict[str, Any] = Field(description="the graph document (contract 5)")
    input_nodes: list[InputNodeOut]
    resolved_functions: dict[str, Any] = Field(description="node_key to the pinned version")

    @model_validator(mode="before")
    @classmethod
    def _from_view(cls, value: Any) -> Any:
        if not isinstance(value, WorkflowDetailView):
            return value
        version = value.version
        return {
            **_attributes(value.workflow),
            "version": version.version,
            "version_id": version.id,
            "version_created_at": version.created_at,
            "graph": version.graph,
            "input_nodes": version.input_nodes(),
            "resolved_functions": version.resolved_functions,
        }


class ValidateOut(Out):
    valid: bool
    report: ValidationReport

    @model_validator(mode="before")
    @classmethod
    def _from_report(cls, value: Any) -> Any:
        return {"valid": value.valid, "report": value} if isinstance(value, Report) else value


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
        exclude_if=_is_none,
        description="the `since` of a tick asked with it: node_states is partial",
    )


class PlanOut(Out):
    run_id: str = Field(validation_alias="id")
    workflow_version_id: str
    status: RunStatus
    revision: int
    plan: dict[str, Any] = Field(validation_alias="plan_snapshot")
    node_states: NodeStates
