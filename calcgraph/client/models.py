"""Typed answers of the REST API. Every model accepts fields it does not name (`extra="allow"`,
kept on the instance and in `model_dump()`), so a newer server never breaks an older client."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

RUN_TERMINAL = frozenset({"completed", "failed", "cancelled"})
JOB_TERMINAL = frozenset({"success", "failed"})


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


T = TypeVar("T", bound=Model)


class Page(Model, Generic[T]):
    """One page of a listing; pass `next_cursor` back as `cursor` for the next page."""

    items: list[T]
    next_cursor: str | None = None


class Health(Model):
    status: str
    database: str | None = None
    version: str | None = None


class Compatibility(Model):
    compatibility: str
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.compatibility == "ALLOWED"


class User(Model):
    id: str
    username: str
    sub: str | None = None
    email: str | None = None
    roles: list[str] = Field(default_factory=list)


class UserUsage(Model):
    """What one user holds now (`GET /admin/usage`)."""

    user_id: str
    username: str
    unfinished_runs: int
    jobs: int
    queued_jobs: int
    stored_bytes: int
    largest_workflow_nodes: int = 0


class Quotas(Model):
    """The per-user limits of the server (its `CALCGRAPH_LIMIT_*` settings)."""

    runs: int
    nodes: int
    queued_jobs: int
    stored_bytes: int


class UsageReport(Model):
    items: list[UserUsage]
    limits: Quotas


class Member(Model):
    username: str
    role: str


class Organization(Model):
    id: str
    slug: str
    name: str
    created_at: datetime | None = None
    members: list[Member] = Field(default_factory=list)


class LoginStart(Model):
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


class LoginResult(Model):
    access_token: str
    token_type: str = "Bearer"
    expires_in: int | None = None
    refresh_token: str | None = None
    id_token: str | None = None
    user: User | None = None


class FunctionDeployment(Model):
    id: str
    name: str
    version: str
    version_id: str
    status: str = ""
    endpoint: str | None = None
    changelog: str | None = None
    is_breaking_change: bool = False
    deprecated: bool = False


class DeploymentReport(Model):
    package_id: str
    package: str
    package_version: str
    package_version_id: str
    is_latest: bool = True
    is_stable: bool = True
    git_ref: str | None = None
    git_commit: str | None = None
    functions: list[FunctionDeployment] = Field(default_factory=list)
    removed_functions: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    breaking_changes: list[dict[str, Any]] = Field(default_factory=list)
    dependencies: dict[str, str] = Field(default_factory=dict)
    """The declared dependencies as pinned, version by package name."""
    dependency_closure: dict[str, str] = Field(default_factory=dict)
    """Every package staged beside the code: the pins and what they brought along."""


class InterfaceChange(Model):
    function: str
    change: str
    port: str | None = None
    breaking: bool
    reason: str


class PackageDiff(Model):
    """The interface changes between two versions of a package."""

    package: str
    from_version: str
    to_version: str
    changes: list[InterfaceChange] = Field(default_factory=list)


class Package(Model):
    id: str
    name: str
    visibility: str
    owner: str | None = None
    organization: str | None = None
    description: str | None = None
    current_version: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Function(Model):
    id: str
    name: str
    package_id: str
    package: str
    current_version: str | None = None
    current_version_id: str | None = None
    created_at: datetime | None = None


class FunctionDetail(Function):
    current: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    typed: bool = False


class ExecuteResult(Model):
    """The answer of an execute call: outputs or error when the job ended within `wait`."""

    job_id: str
    status: str
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] = []
    """Set when the function version is deprecated (the `Deprecation` header's reason)."""

    @property
    def done(self) -> bool:
        return self.status in JOB_TERMINAL


class Job(Model):
    id: str
    status: str
    function_id: str | None = None
    function_version_id: str | None = None
    package_id: str | None = None
    inputs: Any = None
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    logs: str | None = None
    cache_hit: bool = False
    workflow_run_id: str | None = None
    node_key: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outputs_omitted: bool = False
    """A listing left the outputs out (over 64 KiB): `client.get_job(id)` reads them whole."""
    inputs_omitted: bool = False
    """A listing left the inputs out (over 64 KiB): `client.get_job(id)` reads them whole."""

    @property
    def done(self) -> bool:
        return self.status in JOB_TERMINAL


class Workflow(Model):
    id: str
    slug: str
    name: str
    visibility: str = "private"
    owner: str | None = None
    organization: str | None = None
    latest_version: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class WorkflowDetail(Workflow):
    version: int
    version_id: str
    graph: dict[str, Any]
    input_nodes: list[dict[str, Any]] = Field(default_factory=list)
    resolved_functions: dict[str, Any] = Field(default_factory=dict)


class WorkflowValidation(Model):
    valid: bool
    report: dict[str, Any] = Field(default_factory=dict)


class NodeState(Model):
    status: str
    job_id: str | None = None
    outputs: dict[str, Any] | None = None
    outputs_omitted: bool = False
    """Over 64 KiB or past the answer's bound: the node's job (`jobs.get`) has them."""
    error: dict[str, Any] | None = None
    attempt: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    retry_at: datetime | None = None
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    reused: bool = False


class RunSummary(Model):
    """A run as listings give it (no plan, no node states)."""

    id: str
    status: str
    workflow_id: str | None = None
    workflow_version_id: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    terminal_outputs: dict[str, Any] | None = None
    error_message: str | None = None
    first_failed_node_key: str | None = None
    revision: int = 0
    rerun_of: str | None = None
    retry_at: datetime | None = None
    terminal_outputs_omitted: bool = False

    @property
    def done(self) -> bool:
        return self.status in RUN_TERMINAL


class Run(RunSummary):
    """WorkflowRunResponse: what run creation, the run read and every tick answer."""

    plan_snapshot: dict[str, Any] | None = None
    node_states: dict[str, NodeState] = Field(default_factory=dict)


class RunPlan(Model):
    run_id: str
    status: str
    workflow_version_id: str | None = None
    revision: int = 0
    plan: dict[str, Any] | None = None
    node_states: dict[str, NodeState] = Field(default_factory=dict)


class Event(Model):
    """A CloudEvents 1.0 event (contract section 9)."""

    id: str
    type: str
    subject: str
    time: str
    data: dict[str, Any]
    specversion: str = "1.0"
    source: str = "calcgraph"
    datacontenttype: str = "application/json"


class EventPage(Model):
    items: list[Event]
    next_cursor: str


class Webhook(Model):
    id: str
    url: str
    types: list[str]
    description: str = ""
    enabled: bool = True
    created_at: str | None = None
    secret: str | None = None
    """Only in the answer that created it."""


class Delivery(Model):
    event_id: str
    type: str
    attempt: int
    state: str
    status_code: int | None = None
    error: str | None = None
    duration_ms: int | None = None
    attempted_at: str | None = None
    next_attempt_at: str | None = None
