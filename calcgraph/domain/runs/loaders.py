"""What the GraphQL loaders read of runs the caller already read: their node rows, summaries,
latest runs, plans and workflow versions, the immutable ones through the process's memo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.runs.listing.repository import RunListRepository
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.views import NodeRow, RunView
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowVersionView


class RunLoads:
    """The loader reads of `RunService`."""

    memo: RunMemo

    async def node_rows(
        self, session: AsyncSession, run_ids: Sequence[str], *, values: bool = True
    ) -> list[NodeRow]:
        """Node states of runs the caller already read (GraphQL loaders); without `values`,
        their outputs and errors are left out (None)."""
        return await RunRepository.from_session(session).node_rows(run_ids, values=values)

    async def visible_summaries(
        self, session: AsyncSession, principal: Principal, run_ids: Sequence[str]
    ) -> dict[str, RunView]:
        """The runs among `run_ids` the caller may see, by id, without node states, plan and
        terminal outputs (GraphQL loaders: a job's run)."""
        rows = await RunListRepository.from_session(session).visible_summaries(principal, run_ids)
        return {row.id: row for row in rows}

    async def last_runs(
        self, session: AsyncSession, principal: Principal, workflow_ids: Sequence[str]
    ) -> dict[str, RunView]:
        """The caller's latest run (admins: anyone's) of each workflow among `workflow_ids`
        the caller already read, by workflow id, as summaries (GraphQL loaders)."""
        rows = await RunListRepository.from_session(session).last_runs(principal, workflow_ids)
        return {row.workflow_id: row for row in rows}

    async def plan_snapshots(
        self, session: AsyncSession, run_ids: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        """The frozen plans of runs the caller already read (GraphQL loaders): from the memo
        when remembered, else read (a 10,000-node plan is megabytes: only when asked for)."""
        found, missing = self.memo.plan_snapshots(run_ids)
        if missing:
            found.update(await RunRepository.from_session(session).plan_snapshots(missing))
        return found

    async def workflow_versions(
        self, session: AsyncSession, ids: Sequence[str]
    ) -> dict[str, WorkflowVersionView]:
        """The workflow versions of runs the caller already read (GraphQL loaders). Immutable
        and large (a 1,000-node graph), so remembered across requests."""
        found, missing = self.memo.workflow_versions(ids)
        if missing:
            loaded = await workflow_service.versions_by_id(session, missing)
            self.memo.remember_workflow_versions(loaded.values())
            found.update(loaded)
        return found
