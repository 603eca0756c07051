"""GraphQL node states of a run, and the relations a query selects on them (a node's job, its
earlier attempts' jobs, its function version), filled in one loader batch per relation for
the whole list; with the per-request loaders of the run graph that `workflows.py` shares."""

from __future__ import annotations

import bisect
from datetime import datetime
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain import answers
from calcgraph.domain.runs.state import NodeState
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobType
from calcgraph.schema.node_loaders import NodeLoaders
from calcgraph.schema.packages import FunctionVersionType, package_loaders_of
from calcgraph.schema.selection import job_fields, job_of_fields, selects
from calcgraph.schema.workflow_loaders import WorkflowLoaders


def workflow_loaders_of(info: Info) -> WorkflowLoaders:
    """Built on first use in a request (the context is per request)."""
    principal = principal_of(info)
    if info.context.workflow_loaders is None:
        info.context.workflow_loaders = WorkflowLoaders.build(info.context.database, principal)
    return info.context.workflow_loaders


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


def page_in_hand(
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


async def with_relations(
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
