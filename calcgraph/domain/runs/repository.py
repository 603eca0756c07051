"""All SQL of workflow runs and their node states.

A tick reads the run row (locked), every node row of the run and the results of the jobs its
running nodes wait on, then writes only the node rows that changed: a fixed number of
statements whatever the size of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, event, insert, or_, select, true, update
from sqlalchemy.orm import defer

from calcgraph.db.base import RepositoryBase
from calcgraph.db.dialect import locked
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import NodeState as NodeRowModel
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.state import JobResult, NodeState
from calcgraph.domain.runs.views import NodeRow, RunView
from calcgraph.domain.workflows.models import Workflow
from calcgraph.domain.workflows.repository import visible_workflow_clause

_STATE_COLUMNS = (
    NodeRowModel.node_key,
    NodeRowModel.status,
    NodeRowModel.job_id,
    NodeRowModel.outputs,
    NodeRowModel.error,
    NodeRowModel.attempt,
    NodeRowModel.started_at,
    NodeRowModel.finished_at,
)


@dataclass(frozen=True)
class WorkflowFacts:
    """What the access policy needs of a run's workflow."""

    owner_id: str
    organization_id: str | None
    visibility: str


def run_view(
    run: WorkflowRun,
    states: Mapping[str, NodeState] | None = None,
    plan_snapshot: dict[str, Any] | None = None,
) -> RunView:
    return RunView(
        id=run.id,
        workflow_id=run.workflow_id,
        workflow_version_id=run.workflow_version_id,
        user_id=run.user_id,
        status=run.status,
        inputs=run.inputs,
        terminal_outputs=run.terminal_outputs,
        error_message=run.error_message,
        first_failed_node_key=run.first_failed_node_key,
        plan_snapshot=run.plan_snapshot if plan_snapshot is None else plan_snapshot,
        revision=run.revision,
        started_at=run.started_at,
        completed_at=run.completed_at,
        node_states=states,
    )


def _state(row: Any) -> NodeState:
    return NodeState(
        status=row[1],
        job_id=row[2],
        outputs=row[3],
        error=row[4],
        attempt=row[5],
        started_at=row[6],
        finished_at=row[7],
    )


class RunRepository(RepositoryBase[WorkflowRun]):
    model = WorkflowRun

    async def locked_run(
        self, run_id: str, *, lock: bool = True
    ) -> tuple[WorkflowRun, WorkflowFacts] | None:
        """The run row, locked until the end of the unit of work (the tick's serialisation)
        unless `lock` is false, with its workflow's access facts; its large `plan_snapshot`
        is not loaded."""
        query = (
            select(WorkflowRun, Workflow.owner_id, Workflow.organization_id, Workflow.visibility)
            .join(Workflow, Workflow.id == WorkflowRun.workflow_id)
            .where(WorkflowRun.id == run_id)
            .options(defer(WorkflowRun.plan_snapshot, raiseload=True))
            .execution_options(populate_existing=True)
        )
        if lock:
            query = locked(self.session.get_bind().dialect.name, query, of=WorkflowRun)
        row = (await self.session.execute(query)).first()
        if row is None:
            return None
        return row[0], WorkflowFacts(row[1], row[2], row[3])

    async def plan_snapshot(self, run_id: str) -> dict[str, Any]:
        snapshot = await self.session.scalar(
            select(WorkflowRun.plan_snapshot).where(WorkflowRun.id == run_id)
        )
        assert snapshot is not None  # the run row is locked: it exists
        return dict(snapshot)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the unit of work has committed (never after a rollback)."""
        event.listen(self.session.sync_session, "after_commit", lambda _: callback(), once=True)

    async def add_node_states(self, run_id: str, kinds: Mapping[str, str]) -> None:
        if not kinds:
            return
        await self.session.execute(
            insert(NodeRowModel),
            [
                {"run_id": run_id, "node_key": key, "kind": kind, "status": "pending", "attempt": 0}
                for key, kind in kinds.items()
            ],
        )

    async def states(self, run_id: str) -> dict[str, NodeState]:
        rows = await self.session.execute(
            select(*_STATE_COLUMNS).where(NodeRowModel.run_id == run_id)
        )
        return {row[0]: _state(row) for row in rows}

    async def node_rows(self, run_ids: Sequence[str]) -> list[NodeRow]:
        if not run_ids:
            return []
        rows = await self.session.execute(
            select(NodeRowModel.run_id, NodeRowModel.kind, *_STATE_COLUMNS)
            .where(NodeRowModel.run_id.in_(run_ids))
            .order_by(NodeRowModel.run_id, NodeRowModel.node_key)
        )
        return [NodeRow(row[0], row[2], row[1], _state(row[2:])) for row in rows]

    async def finished_results(self, run_id: str) -> dict[str, JobResult]:
        """Results of the finished jobs that running nodes of the run wait on."""
        rows = await self.session.execute(
            select(Job.id, Job.status, Job.outputs, Job.error, Job.finished_at)
            .join(NodeRowModel, NodeRowModel.job_id == Job.id)
            .where(
                NodeRowModel.run_id == run_id,
                NodeRowModel.status == "running",
                Job.status.in_(("success", "failed")),
            )
        )
        return {
            row[0]: JobResult(row[1], outputs=row[2], error=row[3], finished_at=row[4])
            for row in rows
        }

    async def running_jobs(self, run_id: str) -> list[tuple[str, str]]:
        """(job id, job status) of every job a running node of the run waits on."""
        rows = await self.session.execute(
            select(Job.id, Job.status)
            .join(NodeRowModel, NodeRowModel.job_id == Job.id)
            .where(NodeRowModel.run_id == run_id, NodeRowModel.status == "running")
        )
        return [(row[0], row[1]) for row in rows]

    async def write_states(self, run_id: str, changed: Mapping[str, NodeState]) -> None:
        """Only the changed rows, in one executemany UPDATE by primary key."""
        if not changed:
            return
        await self.session.execute(
            update(NodeRowModel),
            [
                {
                    "run_id": run_id,
                    "node_key": key,
                    "status": state.status,
                    "job_id": state.job_id,
                    "outputs": None if state.outputs is None else dict(state.outputs),
                    "error": None if state.error is None else dict(state.error),
                    "attempt": state.attempt,
                    "started_at": state.started_at,
                    "finished_at": state.finished_at,
                }
                for key, state in changed.items()
            ],
        )

    async def function_owners(self, version_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Function version id -> (function id, package id), for the job rows of a tick."""
        wanted = sorted(set(version_ids))
        if not wanted:
            return {}
        rows = await self.session.execute(
            select(FunctionVersion.id, Function.id, Function.package_id)
            .join(Function, Function.id == FunctionVersion.function_id)
            .where(FunctionVersion.id.in_(wanted))
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    async def list_visible(
        self,
        principal: Principal,
        limit: int,
        after: tuple[str, ...] | None,
        statuses: Sequence[str],
        workflow_id: str | None,
    ) -> list[RunView]:
        """The caller's runs (admins: all) whose workflow the caller can still see, newest
        first, without node states."""
        query = select(WorkflowRun).join(Workflow, Workflow.id == WorkflowRun.workflow_id)
        if not principal.is_admin:
            query = query.where(
                WorkflowRun.user_id == principal.user_id, visible_workflow_clause(principal)
            )
        if statuses:
            query = query.where(WorkflowRun.status.in_(statuses))
        if workflow_id is not None:
            query = query.where(WorkflowRun.workflow_id == workflow_id)
        query = query.where(_before(after))
        rows = await self.session.scalars(
            query.order_by(WorkflowRun.started_at.desc(), WorkflowRun.id.desc()).limit(limit + 1)
        )
        return [run_view(run) for run in rows]

    async def runs_by_id(self, ids: Sequence[str]) -> list[WorkflowRun]:
        if not ids:
            return []
        return list(await self.session.scalars(select(WorkflowRun).where(WorkflowRun.id.in_(ids))))

    async def set_fields(self, run_id: str, **values: Any) -> None:
        await self.session.execute(
            update(WorkflowRun)
            .where(WorkflowRun.id == run_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


def _before(after: tuple[str, ...] | None) -> Any:
    if after is None:
        return true()
    try:
        when, last_id = datetime.fromisoformat(after[0]), after[1]
    except (ValueError, IndexError):
        raise ValidationError(
            "cursor is not one this listing issued",
            [FieldError(("query", "cursor"), "unknown cursor")],
        ) from None
    return or_(
        WorkflowRun.started_at < when,
        and_(WorkflowRun.started_at == when, WorkflowRun.id < last_id),
    )
