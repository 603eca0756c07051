"""Per-request DataLoaders of the run graph (run -> workflow version, run -> node states ->
job, workflow -> latest version). Each batch opens its own short-lived read session.

A run's workflow version and node states, and a workflow's latest version, are part of
objects the caller was allowed to read (a run it may see, a workflow it may see): those add no
check. A node's job does: it is a job like any other, readable under the top-level rule of
`job(id)` / `GET /jobs/{id}` (the run's owner while the job's package stays visible to them,
admins), so a node whose package went private answers `job: null` (the field is nullable, as
every hidden relation that may be absent is; non-null relations such as `Job.package` answer
`PermissionDenied`). Function versions go through the package loaders, which apply the policy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.views import NodeRow
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowVersionView

V = TypeVar("V")
L = TypeVar("L", bound=DataLoader[Any, Any])


def _loader(
    kind: type[L],
    database: Database,
    fetch: Callable[[AsyncSession, list[str]], Awaitable[dict[str, V]]],
    default: Callable[[], V],
) -> L:
    async def batch(keys: list[str]) -> list[V]:
        async with database.read_session() as session:
            found = await fetch(session, keys)
        return [found.get(key, default()) for key in keys]

    return kind(load_fn=batch)


class WorkflowVersionByIdLoader(DataLoader[str, WorkflowVersionView | None]):
    """An immutable workflow version (remembered by the run service across requests)."""


class WorkflowVersionByWorkflowIdLoader(DataLoader[str, WorkflowVersionView | None]):
    """The latest version of a workflow."""


class NodeStatesByRunIdLoader(DataLoader[str, list[NodeRow]]):
    """Every node state of a run, in node key order."""


class JobByIdLoader(DataLoader[str, JobView | None]):
    """The job of a node; None when the caller may not read it now."""


@dataclass
class WorkflowLoaders:
    workflow_version_by_id: WorkflowVersionByIdLoader
    workflow_version_by_workflow_id: WorkflowVersionByWorkflowIdLoader
    node_states_by_run_id: NodeStatesByRunIdLoader
    job_by_id: JobByIdLoader

    @classmethod
    def build(cls, database: Database, principal: Principal) -> WorkflowLoaders:
        def none() -> None:
            return None

        async def versions(
            s: AsyncSession, ids: list[str]
        ) -> dict[str, WorkflowVersionView | None]:
            return dict(await run_service.workflow_versions(s, ids))

        async def latest(s: AsyncSession, ids: list[str]) -> dict[str, WorkflowVersionView | None]:
            return dict(await workflow_service.latest_versions(s, ids))

        async def nodes(s: AsyncSession, ids: list[str]) -> dict[str, list[NodeRow]]:
            grouped: dict[str, list[NodeRow]] = {run_id: [] for run_id in ids}
            for row in await run_service.node_rows(s, ids):
                grouped[row.run_id].append(row)
            return grouped

        async def jobs(s: AsyncSession, ids: Sequence[str]) -> dict[str, JobView | None]:
            return dict(await job_read_service.visible_jobs(s, principal, ids))

        return cls(
            workflow_version_by_id=_loader(WorkflowVersionByIdLoader, database, versions, none),
            workflow_version_by_workflow_id=_loader(
                WorkflowVersionByWorkflowIdLoader, database, latest, none
            ),
            node_states_by_run_id=_loader(NodeStatesByRunIdLoader, database, nodes, list),
            job_by_id=_loader(JobByIdLoader, database, jobs, none),
        )
