"""Per-request DataLoaders of the run graph (run -> workflow version, run -> plan, run -> node
states -> job, workflow -> latest version). Each batch opens its own short-lived read session.

A run's workflow version and node states, and a workflow's latest version, are part of
objects the caller was allowed to read (a run it may see, a workflow it may see): those add no
check. A node's job does: it is a job like any other, readable under the top-level rule of
`job(id)` / `GET /jobs/{id}` (the run's owner while the job's package stays visible to them,
admins), so a node whose package went private answers `job: null` (the field is nullable, as
every hidden relation that may be absent is; non-null relations such as `Job.package` answer
`PermissionDenied`). Function versions go through the package loaders, which apply the policy.

Jobs are read as projections: only the fields the query selects (`Fields`), so a whole run's
10,000 jobs cost three columns each when the query asks for three, and a run's every job is one
range of the (run, node, attempt) index rather than one probe per node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.views import NodeRow, RunView
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowVersionView, WorkflowView
from calcgraph.schema.loading import none, session_loader

V = TypeVar("V")
Fields = tuple[str, ...]
"""The fields a query selects, in a fixed order, for loaders that read only those: of a job,
`JOB_FIELDS` (`id` among them); of a run's nodes, `("values",)` or none."""
JobRow = dict[str, Any]
"""A job's selected fields by name."""


class WorkflowVersionByIdLoader(DataLoader[str, WorkflowVersionView | None]):
    """An immutable workflow version (remembered by the run service across requests)."""


class WorkflowVersionByWorkflowIdLoader(DataLoader[str, WorkflowVersionView | None]):
    """The latest version of a workflow."""


class NodeStatesByRunIdLoader(DataLoader[tuple[str, Fields], list[NodeRow]]):
    """Every node state of a run by (run id, fields), in node key order; fields `()` leaves
    the outputs and errors out (None), `("values",)` reads them."""


class PlanByRunIdLoader(DataLoader[str, dict[str, Any] | None]):
    """The frozen plan of a run the caller read (large: read only when a field needs it)."""


class RunByIdLoader(DataLoader[str, RunView | None]):
    """A run summary by id (a job's run); None when the caller may not see it."""


class LastRunByWorkflowIdLoader(DataLoader[str, RunView | None]):
    """The caller's latest run of a workflow (admins: anyone's), as a summary."""


class WorkflowByIdLoader(DataLoader[str, WorkflowView | None]):
    """A workflow by id (a run's); None when the caller may not see it."""


class JobByIdLoader(DataLoader[tuple[str, Fields], JobRow | None]):
    """The selected fields of a node's job by (job id, fields); None when the caller may not
    read the job now."""


class JobsOfRunLoader(DataLoader[tuple[str, Fields], dict[str, JobRow]]):
    """The selected fields of every job of a run by (run id, fields), by job id; the jobs the
    caller may not read now are absent."""


def _by_fields(
    database: Database,
    fetch: Callable[[AsyncSession, list[str], Fields], Awaitable[Mapping[str, V]]],
    default: Callable[[], V],
) -> Callable[[list[tuple[str, Fields]]], Awaitable[list[V]]]:
    """A batch function over (id, fields) keys: one statement per distinct `fields`."""

    async def batch(keys: list[tuple[str, Fields]]) -> list[V]:
        ids_by_fields: dict[Fields, list[str]] = defaultdict(list)
        for key, fields in keys:
            ids_by_fields[fields].append(key)
        found: dict[tuple[str, Fields], V] = {}
        async with database.read_session() as session:
            for fields, ids in ids_by_fields.items():
                for key, value in (await fetch(session, ids, fields)).items():
                    found[(key, fields)] = value
        return [found.get(key, default()) for key in keys]

    return batch


def _no_job() -> JobRow | None:
    return None


@dataclass
class WorkflowLoaders:
    workflow_version_by_id: WorkflowVersionByIdLoader
    workflow_version_by_workflow_id: WorkflowVersionByWorkflowIdLoader
    node_states_by_run_id: NodeStatesByRunIdLoader
    plan_by_run_id: PlanByRunIdLoader
    job_by_id: JobByIdLoader
    jobs_of_run: JobsOfRunLoader
    run_by_id: RunByIdLoader
    last_run_by_workflow_id: LastRunByWorkflowIdLoader
    workflow_by_id: WorkflowByIdLoader

    @classmethod
    def build(cls, database: Database, principal: Principal) -> WorkflowLoaders:
        async def versions(
            s: AsyncSession, ids: list[str]
        ) -> dict[str, WorkflowVersionView | None]:
            return dict(await run_service.workflow_versions(s, ids))

        async def latest(s: AsyncSession, ids: list[str]) -> dict[str, WorkflowVersionView | None]:
            return dict(await workflow_service.latest_versions(s, ids))

        async def nodes(
            s: AsyncSession, ids: list[str], fields: Fields
        ) -> dict[str, list[NodeRow]]:
            grouped: dict[str, list[NodeRow]] = {run_id: [] for run_id in ids}
            for row in await run_service.node_rows(s, ids, values="values" in fields):
                grouped[row.run_id].append(row)
            return grouped

        async def plans(s: AsyncSession, ids: list[str]) -> dict[str, dict[str, Any] | None]:
            return dict(await run_service.plan_snapshots(s, ids))

        async def jobs(s: AsyncSession, ids: list[str], fields: Fields) -> dict[str, JobRow]:
            return await job_read_service.visible_fields(s, principal, fields, ids=ids)

        async def of_runs(
            s: AsyncSession, ids: list[str], fields: Fields
        ) -> dict[str, dict[str, JobRow]]:
            grouped: dict[str, dict[str, JobRow]] = {run_id: {} for run_id in ids}
            wanted = fields if "workflow_run_id" in fields else (*fields, "workflow_run_id")
            found = await job_read_service.visible_fields(s, principal, wanted, run_ids=ids)
            for job_id, row in found.items():
                grouped[row["workflow_run_id"]][job_id] = row
            return grouped

        async def runs(s: AsyncSession, ids: list[str]) -> dict[str, RunView | None]:
            return dict(await run_service.visible_summaries(s, principal, ids))

        async def last_runs(s: AsyncSession, ids: list[str]) -> dict[str, RunView | None]:
            return dict(await run_service.last_runs(s, principal, ids))

        async def workflows(s: AsyncSession, ids: list[str]) -> dict[str, WorkflowView | None]:
            return dict(await workflow_service.visible_by_id(s, principal, ids))

        return cls(
            run_by_id=session_loader(RunByIdLoader, database, runs, none),
            last_run_by_workflow_id=session_loader(
                LastRunByWorkflowIdLoader, database, last_runs, none
            ),
            workflow_by_id=session_loader(WorkflowByIdLoader, database, workflows, none),
            workflow_version_by_id=session_loader(
                WorkflowVersionByIdLoader, database, versions, none
            ),
            workflow_version_by_workflow_id=session_loader(
                WorkflowVersionByWorkflowIdLoader, database, latest, none
            ),
            node_states_by_run_id=NodeStatesByRunIdLoader(
                load_fn=_by_fields(database, nodes, list)
            ),
            plan_by_run_id=session_loader(PlanByRunIdLoader, database, plans, none),
            job_by_id=JobByIdLoader(load_fn=_by_fields(database, jobs, _no_job)),
            jobs_of_run=JobsOfRunLoader(load_fn=_by_fields(database, of_runs, dict)),
        )
