"""All SQL of running a chain on one worker (`calcgraph.domain.runs.chains.service`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select

from calcgraph.db.base import RepositoryBase
from calcgraph.db.dialect import by_keys, insert_ignoring_duplicates, locked
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs import changes
from calcgraph.domain.runs.models import ChainStart, WorkflowRun
from calcgraph.domain.runs.models import NodeState as NodeRowModel

_NODES = cast(Table, NodeRowModel.__table__)


@functools.cache
def _node_states(dialect_name: str) -> Any:
    """(node key, status, attempt) of the nodes bound to `keys` of the run bound to `run_id`,
    one probe of the primary key each: as `run_id = ... AND node_key IN (...)`, PostgreSQL read
    the run's every node through the (run, status) index and kept the ~100 asked for (20 ms
    each, 78 times in a 10,000-node run on fresh tables, under the run's lock)."""
    return by_keys(
        dialect_name,
        (_NODES.c.node_key, _NODES.c.status, _NODES.c.attempt),
        _NODES.c.node_key,
        "keys",
        prefix=(_NODES.c.run_id == bindparam("run_id"),),
    )


class ChainRepository(RepositoryBase[Job]):
    model = Job

    async def place(self, job_id: str) -> tuple[str, str] | None:
        """(run id, node key) of a workflow node's job; None for a job of no run."""
        row = (
            await self.session.execute(
                select(Job.workflow_run_id, Job.node_key).where(Job.id == job_id)
            )
        ).first()
        if row is None or row[0] is None or row[1] is None:
            return None
        return row[0], row[1]

    async def run(self, run_id: str) -> tuple[str, dict[str, Any], bool] | None:
        """(user id, resolved inputs, cache refresh) of a run; its plan is read once per
        process (a 10,000-node plan is megabytes)."""
        row = (
            await self.session.execute(
                select(
                    WorkflowRun.user_id, WorkflowRun.resolved_inputs, WorkflowRun.cache_refresh
                ).where(WorkflowRun.id == run_id)
            )
        ).first()
        return None if row is None else (row[0], dict(row[1]), bool(row[2]))

    async def lock_run(self, run_id: str) -> None:
        """The run's row lock until the end of the unit of work: the one a tick takes, so a
        tick sees a node's finished job and its successor's started job together or neither."""
        query = select(WorkflowRun.id).where(WorkflowRun.id == run_id)
        dialect = self.session.get_bind().dialect.name
        await self.session.execute(locked(dialect, query, of=WorkflowRun))

    async def first_queued(self, run_id: str, node_keys: Sequence[str]) -> tuple[str, str] | None:
        """(node key, job id) of the first of `node_keys` whose job of the run is queued: where
        a chain resumes after a delivery released it."""
        if not node_keys:
            return None
        rows = await self.session.execute(
            select(Job.node_key, Job.id).where(
                Job.workflow_run_id == run_id,
                Job.node_key.in_(list(node_keys)),
                Job.status == "queued",
            )
        )
        queued = {row[0]: row[1] for row in rows}
        return next(((key, queued[key]) for key in node_keys if key in queued), None)

    async def node_states(
        self, run_id: str, node_keys: Sequence[str]
    ) -> dict[str, tuple[str, int]]:
        """(status, attempt) of each of `node_keys` of a run, in one statement."""
        if not node_keys:
            return {}
        rows = await self.session.execute(
            _node_states(self.session.get_bind().dialect.name),
            {"run_id": run_id, "keys": list(node_keys)},
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    async def add_jobs(self, run_id: str, rows: Sequence[dict[str, Any]]) -> set[str]:
        """Insert nodes' jobs, each unless its (run, node, attempt) already has one, in one
        statement, and list the inserted ones for the tick to adopt (`chain_starts`); the ids
        inserted."""
        if not rows:
            return set()
        dialect = self.session.get_bind().dialect.name
        # Core executemany ("insertmanyvalues"): one compiled statement whatever the batch's
        # size, where a multi-row VALUES compiles anew per size (~0.3 ms a row).
        table = Job.__table__
        inserted = await self.session.execute(
            insert_ignoring_duplicates(dialect, table).returning(table.c.id), list(rows)
        )
        ids = {row[0] for row in inserted}
        if ids:
            changes.changed(run_id)  # the run's next tick adopts them
            await self.session.execute(
                insert(cast(Table, ChainStart.__table__)),
                [{"run_id": run_id, "job_id": i} for i in ids],
            )
        return ids
