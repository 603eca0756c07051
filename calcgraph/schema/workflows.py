"""GraphQL types of workflows, versions, runs and node states. Relations (a run's version, a
node's job and function version, a workflow's latest version) go through per-request loaders,
so a run query costs the same number of statements whatever the number of nodes."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain import answers
from calcgraph.domain.read_models import from_attributes
from calcgraph.domain.runs.nodes.service import check_page
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.views import RunView, function_versions
from calcgraph.domain.workflows.views import WorkflowDetailView, WorkflowVersionView, WorkflowView
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobType
from calcgraph.schema.node_loaders import NodeLoaders
from calcgraph.schema.packages import FunctionVersionType, package_loaders_of
from calcgraph.schema.pages import Page
from calcgraph.schema.selection import job_fields, job_of_fields, selects
from calcgraph.schema.workflow_loaders import WorkflowLoaders


def workflow_loaders_of(info: Info) -> WorkflowLoaders:
    """Built on first use in a request (the context is per request)."""
    principal = principal_of(info)
    if info.context.workflow_loaders is None:
        info.context.workflow_loaders = WorkflowLoaders.build(info.context.database, principal)
    return info.context.workflow_loaders


@strawberry.type(name="WorkflowVersion", description="An immutable saved graph of a workflow.")
class WorkflowVersionType:
    id: strawberry.ID = strawberry.field(description="Identifier; runs name the version by it.")
    workflow_id: str = strawberry.field(description="The workflow this is a version of.")
    version: int = strawberry.field(description="1, 2, ...: the order of saving.")
    graph: JSON = strawberry.field(description='The graph document `{"nodes": [...]}`.')
    resolved_functions: JSON = strawberry.field(
        description="Function node key to the function version id it runs, frozen at save."
    )
    input_nodes: JSON = strawberry.field(
        description="Input nodes: `node_key` and `type_expr` of each, what a run needs."
    )
    created_at: datetime = strawberry.field(description="Time of saving.")

    @classmethod
    def from_view(cls, v: WorkflowVersionView) -> WorkflowVersionType:
        return from_attributes(cls, v, input_nodes=v.input_nodes())


@strawberry.type(name="Workflow", description="A workflow: a typed DAG of functions.")
class WorkflowType:
    id: strawberry.ID = strawberry.field(description="Identifier.")
    slug: str = strawberry.field(description="Address of the workflow.")
    name: str = strawberry.field(description="Display name.")
    visibility: str = strawberry.field(description="`private`, `internal` or `public`.")
    owner: str = strawberry.field(description="Username of the owner.")
    organization_slug: str | None = strawberry.field(description="Owning organization's slug.")
    latest_version: int = strawberry.field(description="Number of the latest version.")
    created_at: datetime = strawberry.field(description="Creation time.")
    updated_at: datetime = strawberry.field(description="Time of the latest version.")
    known_latest: strawberry.Private[WorkflowVersionView | None]

    @strawberry.field(description="The latest version, with its graph and input nodes.")
    async def latest(self, info: Info) -> WorkflowVersionType | None:
        found = self.known_latest
        if found is None:
            found = await workflow_loaders_of(info).workflow_version_by_workflow_id.load(
                str(self.id)
            )
        return WorkflowVersionType.from_view(found) if found is not None else None

    @strawberry.field(
        description="The caller's latest run of this workflow (admins: anyone's), without its "
        "terminal outputs (`workflowRun(id)` reads them); one batched read for a page of "
        "workflows. Null when there is none."
    )
    async def last_run(
        self, info: Info
    ) -> Annotated[WorkflowRunType, strawberry.lazy("calcgraph.schema.workflows")] | None:
        found = await workflow_loaders_of(info).last_run_by_workflow_id.load(str(self.id))
        return WorkflowRunType.from_view(found, plan=False) if found is not None else None

    @classmethod
    def from_view(cls, w: WorkflowView, latest: WorkflowVersionView | None = None) -> WorkflowType:
        return from_attributes(cls, w, organization_slug=w.organization, known_latest=latest)

    @classmethod
    def from_detail(cls, detail: WorkflowDetailView) -> WorkflowType:
        return cls.from_view(detail.workflow, detail.version)


@strawberry.type(name="NodeState", description="The state of one function or extract node.")
class NodeStateType:
    node_key: str = strawberry.field(description="The node's key in the graph.")
    status: str = strawberry.field(
        description="`pending`, `running`, `success`, `failed` or `cancelled`."
    )
    job_id: str | None = strawberry.field(description="The node's worker job, once submitted.")
    outputs: JSON | None = strawberry.field(
        description="Output port to value, on success; null when left out (`outputsOmitted`)."
    )
    error: JSON | None = strawberry.field(description="`kind` and `message` on failure.")
    attempt: int = strawberry.field(description="Submissions so far (0 before the first).")
    started_at: datetime | None = strawberry.field(description="When it was submitted.")
    finished_at: datetime | None = strawberry.field(description="When it ended.")
    retry_at: datetime | None = strawberry.field(
        default=None,
        description="A retried node's next attempt is submitted at or after this time.",
    )
    attempts: JSON = strawberry.field(
        default_factory=list,
        description="Earlier attempts that failed and were retried: `[{attempt, job_id, error}]`.",
    )
    reused: bool = strawberry.field(
        default=False, description="A re-run's node that took the original run's result."
    )
    function_version_id: str | None = strawberry.field(
        description="The function version a function node runs (none for extract nodes)."
    )
    outputs_omitted: bool = strawberry.field(
        default=False,
        description="The outputs are over 64 KiB, or past what one answer shows (16 MiB), and "
        "left out: the node's `job { outputs }` (or `job(id)`) reads them whole.",
    )

    # Filled by `WorkflowRun.nodeStates` from one loader batch per relation for the whole
    # list; plain fields, so 1,000 nodes cost no resolver call each.
    job: JobType | None = strawberry.field(
        default=None,
        description="The worker job: status, logs and timings; null before submission and "
        "when the caller may not read the job (its package is no longer visible to them).",
    )
    function_version: FunctionVersionType | None = strawberry.field(
        default=None, description="The function version the node ran."
    )
    attempt_jobs: list[JobType] = strawberry.field(
        default_factory=list,
        description="The jobs of the earlier attempts (`attempts`), in attempt order: their "
        "timings and errors; those the caller may no longer read are left out.",
    )

    @classmethod
    def from_state(
        cls, key: str, state: NodeState, version_id: str | None, *, shown: bool = True
    ) -> NodeStateType:
        """`shown`: the outputs fit the answer (else left out, `outputsOmitted`)."""
        omitted = not shown or getattr(state, "outputs_omitted", False)
        return cls(
            node_key=key,
            status=state.status,
            job_id=state.job_id,
            outputs=cast(
                "JSON | None", None if state.outputs is None or omitted else dict(state.outputs)
            ),
            outputs_omitted=omitted,
            error=cast("JSON | None", None if state.error is None else dict(state.error)),
            attempt=state.attempt,
            started_at=state.started_at,
            finished_at=state.finished_at,
            retry_at=state.retry_at,
            attempts=cast("JSON", [dict(a) for a in state.attempts]),
            reused=state.reused,
            function_version_id=version_id,
        )


def node_loaders_of(info: Info) -> NodeLoaders:
    """Built on first use in a request (the context is per request)."""
    principal_of(info)
    if info.context.node_loaders is None:
        info.context.node_loaders = NodeLoaders.build(info.context.database)
    return info.context.node_loaders


def _page(
    items: list[tuple[str, NodeState]],
    first: int | None,
    after: str | None,
    statuses: tuple[str, ...],
) -> list[tuple[str, NodeState]]:
    """The page of node states already in hand (sorted by key), as the database would give."""
    if after is not None:
        items = items[bisect.bisect_right([k for k, _ in items], after) :]
    if statuses:
        items = [(k, s) for k, s in items if s.status in statuses]
    return items if first is None else items[:first]


async def _with_relations(
    info: Info, nodes: list[NodeStateType], run_id: str, whole: bool
) -> list[NodeStateType]:
    """Fill the relations the query selects, one batch per relation for the whole list (not
    one awaited field per node); `whole`: the list is every node of the run."""
    if selects(info, "job"):
        fields = job_fields(info)
        loaders = workflow_loaders_of(info)
        if whole:  # every job of the run: one range of an index, not a probe per node
            found = await loaders.jobs_of_run.load((run_id, fields))
        else:
            keys = [(n.job_id, fields) for n in nodes if n.job_id is not None]
            found = {row["id"]: row for row in await loaders.job_by_id.load_many(keys) if row}
        jobs: dict[str, JobType] = {}
        for node in nodes:
            job_id = node.job_id
            if job_id is None:
                continue
            job = jobs.get(job_id)
            if job is None and job_id in found:
                job = jobs[job_id] = job_of_fields(found[job_id])
            node.job = job
        _bound_values(info, list(jobs.values()), fields, single=len(nodes) == 1)
    if selects(info, "attemptJobs"):
        await _with_attempt_jobs(info, nodes, run_id, whole)
    if selects(info, "functionVersion"):
        wanted = sorted({n.function_version_id for n in nodes if n.function_version_id})
        loader = package_loaders_of(info).function_version_by_id
        versions = {
            v.id: FunctionVersionType.from_view(v)
            for v in await loader.load_many(wanted)
            if v is not None
        }
        for node in nodes:
            version_id = node.function_version_id
            node.function_version = versions.get(version_id) if version_id else None
    return nodes


async def _with_attempt_jobs(
    info: Info, nodes: list[NodeStateType], run_id: str, whole: bool
) -> None:
    """`attemptJobs` of every node in one batch: the run's jobs (a retried node's earlier jobs
    are jobs of the run), or those of the nodes in hand."""
    ids_of = {
        id(n): [
            str(a["job_id"]) for a in cast("list[dict[str, Any]]", n.attempts) if a.get("job_id")
        ]
        for n in nodes
    }
    if not any(ids_of.values()):
        return
    fields = job_fields(info, "attemptJobs")
    loaders = workflow_loaders_of(info)
    if whole:
        found = await loaders.jobs_of_run.load((run_id, fields))
    else:
        keys = [(job_id, fields) for ids in ids_of.values() for job_id in ids]
        found = {row["id"]: row for row in await loaders.job_by_id.load_many(keys) if row}
    jobs: dict[str, JobType] = {}
    for node in nodes:
        node.attempt_jobs = [
            jobs.setdefault(i, job_of_fields(found[i])) for i in ids_of[id(node)] if i in found
        ]
    _bound_values(info, list(jobs.values()), fields, single=False)


def _bound_values(
    info: Info, jobs: list[JobType], fields: tuple[str, ...], *, single: bool
) -> None:
    """The nodes' jobs show their inputs and outputs within what the answer shows, as a node
    does its outputs: a list's over 64 KiB left out, one node's whole when they fit (contract
    8b). Inputs may hold upstream outputs of many MiB."""
    cap = answers.ANSWER_MAX_BYTES if single else answers.LISTED_VALUE_MAX_BYTES
    budget = info.context.values
    if "inputs" in fields:
        for job in jobs:
            if job.inputs is not None and not budget.take(job.inputs, cap=cap):
                job.inputs, job.inputs_omitted = None, True
    if "outputs" in fields:
        for job in jobs:
            if job.outputs is not None and not budget.take(job.outputs, cap=cap):
                job.outputs, job.outputs_omitted = None, True


async def _plan_snapshot(root: WorkflowRunType, info: Info) -> JSON:
    return cast(JSON, await root._plan(info))


@strawberry.type(name="WorkflowRun", description="A run of a workflow version, advanced by ticks.")
class WorkflowRunType:
    id: strawberry.ID = strawberry.field(description="Run identifier.")
    workflow_id: str = strawberry.field(description="The workflow run.")
    workflow_version_id: str = strawberry.field(description="The version frozen for the run.")
    status: str = strawberry.field(
        description="`pending`, `running`, `completed`, `failed` or `cancelled`."
    )
    started_at: datetime = strawberry.field(description="Creation time.")
    completed_at: datetime | None = strawberry.field(description="When the run ended.")
    inputs: JSON = strawberry.field(description="Inputs as submitted, verbatim.")
    error_message: str | None = strawberry.field(description="Why the run failed.")
    first_failed_node_key: str | None = strawberry.field(description="The first failed node.")
    plan_snapshot: JSON = strawberry.field(
        resolver=_plan_snapshot, description="The frozen plan: `chains`, `waves`."
    )
    revision: int = strawberry.field(description="Bumped by every tick that changed something.")
    rerun_of: str | None = strawberry.field(default=None, description="The run this one re-runs.")
    retry_at: datetime | None = strawberry.field(
        default=None, description="The earliest retry of its nodes still to be submitted."
    )
    terminal: strawberry.Private[Mapping[str, Any] | None]
    listed_omitted: strawberry.Private[bool]
    """A listing left the terminal outputs out (over 64 KiB)."""
    shows_terminal: strawberry.Private[bool | None] = None
    """Decided on first read: whether the terminal outputs fit what the answer shows."""
    states: strawberry.Private[Mapping[str, NodeState] | None]
    known_plan: strawberry.Private[dict[str, Any] | None]
    """The plan snapshot when in hand (a tick's answer); else read when a field needs it."""

    def _shows_terminal(self, info: Info) -> bool:
        if self.shows_terminal is None:
            self.shows_terminal = not self.listed_omitted and info.context.values.take(
                self.terminal, cap=answers.ANSWER_MAX_BYTES
            )
        return self.shows_terminal

    @strawberry.field(
        description="Outputs of the terminal function nodes, by node key, once completed; "
        "null when left out (`terminalOutputsOmitted`)."
    )
    def terminal_outputs(self, info: Info) -> JSON | None:
        if self.terminal is None or not self._shows_terminal(info):
            return None
        return cast(JSON, dict(self.terminal))

    @strawberry.field(
        description="The terminal outputs are left out: over 64 KiB in a listing (then "
        "`workflowRun(id)` reads them), or past what one answer shows (16 MiB; then each "
        "terminal node's `job { outputs }`)."
    )
    def terminal_outputs_omitted(self, info: Info) -> bool:
        if self.listed_omitted:
            return True
        return self.terminal is not None and not self._shows_terminal(info)

    async def _plan(self, info: Info) -> dict[str, Any]:
        if self.known_plan is None:
            loaded = await workflow_loaders_of(info).plan_by_run_id.load(str(self.id))
            self.known_plan = loaded if loaded is not None else {}
        return self.known_plan

    async def _nodes(
        self, info: Info, items: list[tuple[str, NodeState]], whole: bool
    ) -> list[NodeStateType]:
        versions: dict[str, str] = {}
        if selects(info, "functionVersionId") or selects(info, "functionVersion"):
            versions = function_versions(await self._plan(info))
        budget = info.context.values
        budget.spend(answers.NODE_OVERHEAD_BYTES * len(items))
        wants = selects(info, "outputs")
        nodes = [
            NodeStateType.from_state(
                k, s, versions.get(k), shown=not wants or budget.take(s.outputs)
            )
            for k, s in items
        ]
        return await _with_relations(info, nodes, str(self.id), whole)

    @strawberry.field(
        description="The function and extract nodes' states in node key order: every node, or "
        "a page. `first` (1 to 10,000) takes that many; `after` starts after that node key "
        "(pass the last `nodeKey` of the previous page; a page shorter than `first` is the "
        "last); `status` keeps the nodes in those statuses (`pending`, `running`, `success`, "
        "`failed`, `cancelled`)."
    )
    async def node_states(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        status: list[str] | None = None,
    ) -> list[NodeStateType]:
        statuses = tuple(sorted(set(status or ())))
        check_page(first, statuses)
        whole = first is None and after is None and not statuses
        if self.states is not None:  # already in hand (a tick's answer): page it here
            items = _page(sorted(self.states.items()), first, after, statuses)
        elif whole:
            values = ("values",) if selects(info, "outputs") or selects(info, "error") else ()
            rows = await workflow_loaders_of(info).node_states_by_run_id.load(
                (str(self.id), values)
            )
            items = [(row.node_key, row.state) for row in rows]
        else:
            key = (str(self.id), after, first, statuses)
            rows = await node_loaders_of(info).page.load(key)
            items = [(row.node_key, row.state) for row in rows]
        return await self._nodes(info, items, whole)

    @strawberry.field(description="One node's state by its node key; null when no such node.")
    async def node_state(self, info: Info, key: str) -> NodeStateType | None:
        if self.states is not None:
            state = self.states.get(key)
        else:
            row = await node_loaders_of(info).by_key.load((str(self.id), key))
            state = row.state if row is not None else None
        if state is None:
            return None
        (node,) = await self._nodes(info, [(key, state)], whole=False)
        return node

    @strawberry.field(
        description="The workflow run; null when the caller may no longer see it (its "
        "visibility changed)."
    )
    async def workflow(self, info: Info) -> WorkflowType | None:
        found = await workflow_loaders_of(info).workflow_by_id.load(self.workflow_id)
        return WorkflowType.from_view(found) if found is not None else None

    @strawberry.field(description="The workflow version frozen for the run.")
    async def workflow_version(self, info: Info) -> WorkflowVersionType | None:
        found = await workflow_loaders_of(info).workflow_version_by_id.load(
            self.workflow_version_id
        )
        return WorkflowVersionType.from_view(found) if found is not None else None

    @classmethod
    async def visible(cls, info: Info, run_id: str) -> WorkflowRunType | None:
        """A run summary by id (one batched read per request), or None when hidden."""
        found = await workflow_loaders_of(info).run_by_id.load(run_id)
        return cls.from_view(found, plan=False) if found is not None else None

    @classmethod
    def from_view(cls, run: RunView, *, plan: bool = True) -> WorkflowRunType:
        """`plan`: the view holds the run's plan snapshot (not one read without it)."""
        return from_attributes(
            cls,
            run,
            states=run.node_states,
            known_plan=run.plan_snapshot if plan else None,
            terminal=run.terminal_outputs,
            listed_omitted=run.terminal_outputs_omitted,
            shows_terminal=None,
        )


@strawberry.type(description="A page of workflows.")
class WorkflowPage(Page[WorkflowType]):
    items: list[WorkflowType] = strawberry.field(description="Workflows of this page.")


@strawberry.type(description="A page of workflow runs.")
class WorkflowRunPage(Page[WorkflowRunType]):
    items: list[WorkflowRunType] = strawberry.field(description="Runs of this page, newest first.")


@strawberry.type(description="The validation report of a graph.")
class WorkflowValidationType:
    valid: bool = strawberry.field(description="True when the report is empty.")
    report: JSON = strawberry.field(description="Every category of the report, with entries.")
