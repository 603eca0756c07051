"""All SQL of the run listing (`GET /workflow-runs`, GraphQL `workflowRuns`), within one
answer's bound (contract 8b): first the page's ids and value sizes, computed by the database;
then the runs that fit, terminal outputs over 64 KiB left out (`GET /workflow-runs/{id}` and
the jobs read them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, case, null, select, type_coerce
from sqlalchemy.orm import aliased

from calcgraph.db.base import JSONType, RepositoryBase
from calcgraph.domain import answers
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.listing.filters import ALL_TIME, TimeRange
from calcgraph.domain.listing.paging import Page, encode_cursor
from calcgraph.domain.listing.repository import in_range, keyset_clause
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.views import STORED_FIELDS, RunView
from calcgraph.domain.workflows.models import Workflow
from calcgraph.domain.workflows.repository import visible_workflow_clause

_RUNS = cast(Table, WorkflowRun.__table__)
_VIEW_COLUMNS = tuple(c for c in STORED_FIELDS if c != "terminal_outputs")
"""What `_views` reads of a listed run (its terminal outputs apart: left out when large).
The rerun's origin and the retry's time are read too: a listing showed them null."""
_SUMMARY_COLUMNS = tuple(c for c in STORED_FIELDS if c not in ("terminal_outputs", "plan_snapshot"))


class RunListRepository(RepositoryBase[WorkflowRun]):
    model = WorkflowRun

    async def list_visible(
        self,
        principal: Principal,
        limit: int,
        after: tuple[str, ...] | None,
        statuses: Sequence[str],
        workflow_id: str | None,
        started: TimeRange = ALL_TIME,
    ) -> Page[RunView]:
        """The caller's runs (admins: all) whose workflow the caller can still see, newest
        first, without node states, as many as fit one answer."""
        sizes: list[Any] = [
            WorkflowRun.inputs_bytes + WorkflowRun.plan_snapshot_bytes,
            WorkflowRun.terminal_outputs_bytes,
        ]
        query = select(WorkflowRun.id, WorkflowRun.started_at, *sizes).join(
            Workflow, Workflow.id == WorkflowRun.workflow_id
        )
        if not principal.is_admin:
            query = query.where(
                WorkflowRun.user_id == principal.user_id, visible_workflow_clause(principal)
            )
        if statuses:
            query = query.where(WorkflowRun.status.in_(statuses))
        if workflow_id is not None:
            query = query.where(WorkflowRun.workflow_id == workflow_id)
        query = query.where(in_range(WorkflowRun.started_at, started))
        query = query.where(
            keyset_clause(WorkflowRun.started_at, WorkflowRun.id, after, newest_first=True)
        )
        sized = (
            await self.session.execute(
                query.order_by(WorkflowRun.started_at.desc(), WorkflowRun.id.desc()).limit(
                    limit + 1
                )
            )
        ).all()
        shown = [
            size + (outputs if answers.listed(outputs) else 0)
            for _, _, size, outputs in sized[:limit]
        ]
        kept = sized[: answers.rows_within(shown)]
        omitted = {row[0] for row in kept if not answers.listed(row[3])}
        views = {v.id: v for v in await self._views([row[0] for row in kept], omitted)}
        items = [views[row[0]] for row in kept if row[0] in views]
        cursor = encode_cursor(items[-1].sort_key()) if len(kept) < len(sized) and items else None
        return Page(items, cursor, size_hint=sum(shown[: len(kept)]))

    async def _views(self, ids: Sequence[str], omitted: set[str]) -> list[RunView]:
        if not ids:
            return []
        outputs = type_coerce(
            case((_RUNS.c.id.in_(omitted), null()), else_=_RUNS.c.terminal_outputs), JSONType
        ).label("terminal_outputs")
        connection = await self.session.connection()
        rows = await connection.execute(
            select(*(_RUNS.c[name] for name in _VIEW_COLUMNS), outputs).where(
                _RUNS.c.id.in_(list(ids))
            )
        )
        return [
            RunView(
                **{name: getattr(row, name) for name in _VIEW_COLUMNS},
                terminal_outputs=row.terminal_outputs,
                terminal_outputs_omitted=row.id in omitted,
            )
            for row in rows
        ]

    async def visible_summaries(self, principal: Principal, ids: Sequence[str]) -> list[RunView]:
        """The runs among `ids` the caller may see (the listing's rule), as summaries."""
        if not ids:
            return []
        query = self._summaries().where(_RUNS.c.id.in_(list(ids)))
        if not principal.is_admin:
            query = query.join_from(_RUNS, Workflow, Workflow.id == _RUNS.c.workflow_id).where(
                _RUNS.c.user_id == principal.user_id, visible_workflow_clause(principal)
            )
        return await self._summary_views(query)

    async def last_runs(self, principal: Principal, workflow_ids: Sequence[str]) -> list[RunView]:
        """The latest run of each of `workflow_ids` the caller may see (its own; admins any),
        as summaries: one statement, one index probe per workflow."""
        if not workflow_ids:
            return []
        latest = aliased(WorkflowRun)
        newest = select(latest.id).where(latest.workflow_id == Workflow.id)
        if not principal.is_admin:
            newest = newest.where(latest.user_id == principal.user_id)
        newest_id = (
            newest.order_by(latest.started_at.desc(), latest.id.desc())
            .limit(1)
            .correlate(Workflow)
            .scalar_subquery()
        )
        query = (
            self._summaries()
            .join_from(Workflow, _RUNS, _RUNS.c.id == newest_id)
            .where(Workflow.id.in_(list(workflow_ids)))
        )
        return await self._summary_views(query)

    @staticmethod
    def _summaries() -> Any:
        return select(*(_RUNS.c[name] for name in _SUMMARY_COLUMNS))

    async def _summary_views(self, query: Any) -> list[RunView]:
        """Without the plan (read when a field needs it) and the terminal outputs (a completed
        run's are left out, as a listing leaves large ones: `workflowRun(id)` reads them)."""
        connection = await self.session.connection()
        return [
            RunView(
                **{name: getattr(row, name) for name in _SUMMARY_COLUMNS},
                plan_snapshot={},
                terminal_outputs=None,
                terminal_outputs_omitted=row.status == "completed",
            )
            for row in await connection.execute(query)
        ]
