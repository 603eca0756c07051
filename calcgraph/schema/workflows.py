"""GraphQL types of workflows, versions and runs (their node states: `node_states.py`).
Relations (a run's version, a node's job and function version, a workflow's latest version) go
through per-request loaders, so a run query costs the same number of statements whatever the
number of nodes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain import answers
from calcgraph.domain.read_models import from_attributes
from calcgraph.domain.runs.nodes.service import check_page
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.views import RunView, drawing, function_versions
from calcgraph.domain.workflows.views import WorkflowDetailView, WorkflowVersionView, WorkflowView
from calcgraph.schema.context import Info
from calcgraph.schema.node_states import (
    NodeStateType,
    node_loaders_of,
    page_in_hand,
    with_relations,
    workflow_loaders_of,
)
from calcgraph.schema.packages import FunctionVersionType, package_loaders_of
from calcgraph.schema.pages import Page
from calcgraph.schema.selection import selects
from calcgraph.schema.viewed import FromView, view_fields


@strawberry.type(name="WorkflowVersion", description="An immutable saved graph of a workflow.")
@view_fields(
    {
        "id": "Identifier; runs name the version by it.",
        "workflow_id": "The workflow this is a version of.",
        "version": "1, 2, ...: the order of saving.",
        "graph": 'The graph document `{"nodes": [...]}`.',
        "resolved_functions": "Function node key to the function version id it runs, frozen at "
        "save.",
        "input_nodes": "Input nodes: `node_key` and `type_expr` of each, what a run needs.",
        "created_at": "Time of saving.",
    },
    id=strawberry.ID,
    input_nodes=JSON,
)
class WorkflowVersionType(FromView[WorkflowVersionView]):
    @classmethod
    def from_view(cls, v: WorkflowVersionView) -> WorkflowVersionType:
        return cls.viewing(v, input_nodes=v.input_nodes())


@strawberry.type(name="Workflow", description="A workflow: a typed DAG of functions.")
@view_fields(
    {
        "id": "Identifier.",
        "slug": "Address of the workflow.",
        "name": "Display name.",
        "visibility": "`private`, `internal` or `public`.",
        "owner": "Username of the owner.",
        "organization_slug": "Owning organization's slug.",
        "latest_version": "Number of the latest version.",
        "created_at": "Creation time.",
        "updated_at": "Time of the latest version.",
    },
    id=strawberry.ID,
    organization_slug=str | None,
)
class WorkflowType(FromView[WorkflowView]):
    known_latest: strawberry.Private[WorkflowVersionView | None]

    @strawberry.field(description="The latest version, with its graph and input nodes.")
    async def latest(self, info: Info) -> WorkflowVersionType | None:
        found = self.known_latest
        if found is None:
            found = await workflow_loaders_of(info).workflow_version_by_workflow_id.load(
                str(self.view.id)
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
        found = await workflow_loaders_of(info).last_run_by_workflow_id.load(str(self.view.id))
        return WorkflowRunType.from_view(found, plan=False) if found is not None else None

    @classmethod
    def from_view(cls, w: WorkflowView, latest: WorkflowVersionView | None = None) -> WorkflowType:
        return cls.viewing(w, organization_slug=w.organization, known_latest=latest)

    @classmethod
    def from_detail(cls, detail: WorkflowDetailView) -> WorkflowType:
        return cls.from_view(detail.workflow, detail.version)


async def _plan_snapshot(root: WorkflowRunType, info: Info) -> JSON:
    return cast(JSON, await root._plan(info))


async def _plan_graph(root: WorkflowRunType, info: Info) -> JSON:
    return cast(JSON, drawing(await root._plan(info)))


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
    plan_graph: JSON = strawberry.field(
        resolver=_plan_graph,
        description="What a drawing of the run's graph needs of its frozen plan, half of "
        "`planSnapshot`: `input_nodes` (keys) and `nodes`, each with `node_key` and `kind`, a "
        "function node's `function` and `input_bindings`, an extract node's `mode`, "
        "`from_node_key` and `pattern`. It never changes: read it once, not on every tick.",
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
        return await with_relations(info, nodes, str(self.id), whole)

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
            items = page_in_hand(sorted(self.states.items()), first, after, statuses)
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
        description="The function versions the run's function nodes run, each once, in id "
        "order (`nodeStates { functionVersionId }` names each node's): a page of many nodes "
        "reads their schemas and names here rather than once per node; those the caller may "
        "no longer see are left out."
    )
    async def function_versions(self, info: Info) -> list[FunctionVersionType]:
        wanted = sorted(set(function_versions(await self._plan(info)).values()))
        found = await package_loaders_of(info).function_version_by_id.load_many(wanted)
        return [FunctionVersionType.from_view(v) for v in found if v is not None]

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
class WorkflowPage(Page[WorkflowType], items="Workflows of this page."): ...


@strawberry.type(description="A page of workflow runs.")
class WorkflowRunPage(Page[WorkflowRunType], items="Runs of this page, newest first."): ...


@strawberry.type(description="The validation report of a graph.")
class WorkflowValidationType:
    valid: bool = strawberry.field(description="True when the report is empty.")
    report: JSON = strawberry.field(description="Every category of the report, with entries.")
