"""All SQL of a run's creation: its row and its node rows (`create.service.insert_run`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import String, bindparam, func, insert, literal_column, select
from sqlalchemy.dialects.postgresql import ARRAY

from calcgraph.db.base import RepositoryBase, WrittenJSON
from calcgraph.domain.events.numbered.repository import rows_params, with_numbered
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.statements.repository import NODES, RUNS

NODE_ROWS_PER_STATEMENT = 1000
"""A run's node rows are inserted this many per statement (contract 8b: big work in steps)."""

# PostgreSQL: a new run's row and its node rows (pending, from arrays: a data-modifying CTE)
# in one statement; the node rows' foreign key is checked at the statement's end, when the
# run's row is there. Up to `NODE_ROWS_PER_STATEMENT` nodes (`RunCreationRepository.insert_run`).
_NEW_NODES = select(
    bindparam("r_id", type_=String),
    func.unnest(bindparam("a_node_keys", type_=ARRAY(String))),
    func.unnest(bindparam("a_kinds", type_=ARRAY(String))),
    literal_column("'pending'"),
    literal_column("0"),
)
_NODE_COLUMNS = ["run_id", "node_key", "kind", "status", "attempt"]
# PostgreSQL: up to `NODE_ROWS_PER_STATEMENT` of a run's pending node rows from two arrays,
# where an executemany bound five parameters a row (`RunCreationRepository.add_node_states`).
INSERT_NODES = insert(NODES).from_select(_NODE_COLUMNS, _NEW_NODES)
# Every column of the run's row but its outputs, which a new run has none of (a bound None
# would be JSON null, not the NULL an INSERT without the column writes), and the values' sizes,
# which the database computes (generated columns).
# Its plan snapshot is bound as the JSON text its version's plan was written to once
# (`PlannedVersion.written`): 4.5 MiB of JSON to write again at each run of 12,000 nodes.
NEW_RUN_COLUMNS = tuple(c.key for c in RUNS.c if c.key != "terminal_outputs" and c.computed is None)
INSERT_RUN_ROW = insert(RUNS).values(
    {
        name: bindparam(
            f"r_{name}", type_=WrittenJSON() if name == "plan_snapshot" else RUNS.c[name].type
        )
        for name in NEW_RUN_COLUMNS
    }
)
INSERT_RUN = INSERT_RUN_ROW.add_cte(
    insert(NODES).from_select(_NODE_COLUMNS, _NEW_NODES).cte("new_nodes")
)


class RunCreationRepository(RepositoryBase[WorkflowRun]):
    model = WorkflowRun

    def inserts_at_once(self, nodes: int) -> bool:
        """Whether `insert_run` writes a run of `nodes` nodes, and the unit's held events, in
        one statement (PostgreSQL, up to `NODE_ROWS_PER_STATEMENT` nodes)."""
        dialect = self.session.get_bind().dialect.name
        return dialect == "postgresql" and nodes <= NODE_ROWS_PER_STATEMENT

    async def insert_run(
        self,
        run: WorkflowRun,
        written_plan: str,
        kinds: Mapping[str, str],
        events: Sequence[dict[str, Any]] = (),
    ) -> None:
        """A new run's row, its plan snapshot given as the JSON text `written_plan`, and its
        node rows, pending, of these kinds by node key. When `inserts_at_once`: one statement
        (`INSERT_RUN`), writing the unit's held `events` with their positions too
        (`with_numbered`); else the row (`INSERT_RUN_ROW`), then `add_node_states` (and no
        events: given only with the former)."""
        assert run.terminal_outputs is None
        params: dict[str, Any] = {f"r_{n}": getattr(run, n) for n in NEW_RUN_COLUMNS}
        params["r_plan_snapshot"] = written_plan
        if not self.inserts_at_once(len(kinds)):
            assert not events, "held events are written by a run's insert at once only"
            await self.session.execute(INSERT_RUN_ROW, params)
            await self.add_node_states(run.id, kinds)
            return
        params |= {"a_node_keys": list(kinds), "a_kinds": list(kinds.values())}
        statement = INSERT_RUN
        if events:
            statement = with_numbered(statement)
            params |= rows_params(events)
        await self.session.execute(statement, params)

    async def add_node_states(self, run_id: str, kinds: Mapping[str, str]) -> None:
        """One row per node, inserted `NODE_ROWS_PER_STATEMENT` at a time: the parameters of
        12,000 rows took the event loop for one long step, between two of which the other
        callers (and /health) are served. PostgreSQL: each step from two arrays
        (`INSERT_NODES`), elsewhere an executemany of Core rows."""
        keys, kinds_of = list(kinds), list(kinds.values())
        postgresql = self.session.get_bind().dialect.name == "postgresql"
        for start in range(0, len(keys), NODE_ROWS_PER_STATEMENT):
            step = slice(start, start + NODE_ROWS_PER_STATEMENT)
            if postgresql:
                params = {"r_id": run_id, "a_node_keys": keys[step], "a_kinds": kinds_of[step]}
                await self.session.execute(INSERT_NODES, params)
                continue
            rows = [
                {"run_id": run_id, "node_key": k, "kind": kind, "status": "pending", "attempt": 0}
                for k, kind in zip(keys[step], kinds_of[step], strict=True)
            ]
            await self.session.execute(insert(NODES), rows)
