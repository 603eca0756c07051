"""The hot statements of the tick and of chain recording, as PostgreSQL plans them.

`seed` writes a run's data the way a 10,000-node run (100 chains of 100) looks half-way: the
first half of each chain succeeded, one node per chain running, and half of the chains with a
job a chain worker started for the next node (`chain_starts`); a small run of 100 chains of 2
with as much in flight; and finished runs around them. `hot_statements` calls the real
repository methods on one run and records the SQL they send; `explain` plans each one.
Shared by `tests/runs/test_tick_plans.py` and `bench/bench_scale_tick.py`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Container, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, event, insert, text
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import Base
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.jobs.store.repository import Finish, JobStoreRepository
from calcgraph.domain.runs.chains.repository import ChainRepository
from calcgraph.domain.runs.models import ChainStart, WorkflowRun
from calcgraph.domain.runs.models import NodeState as NodeRow
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.statements.repository import RUN_FIELDS
from calcgraph.domain.workflows.models import Workflow

BIG_TABLES = ("node_states", "jobs")
"""Tables that grow with runs. `chain_starts` holds only starts not yet adopted (a few per
chain in flight): PostgreSQL may rightly scan it while it is that small; the rows read say
whether that costs."""
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SeededRun:
    run_id: str
    chains: int
    length: int
    revision: int


async def own_tables(session: AsyncSession) -> None:
    """Tables of this transaction's own: a new schema, first on the search path, with every
    table created in it. Their plans then depend on nothing that ran before: no rows, dead rows
    or statistics another test or autovacuum left in the shared tables (autovacuum cannot see
    a table before its transaction commits, and the caller rolls back)."""
    schema = f"plans_{uuid.uuid4().hex}"
    await session.execute(text(f'CREATE SCHEMA "{schema}"'))
    await session.execute(text(f'SET LOCAL search_path TO "{schema}"'))
    await session.run_sync(lambda sync: Base.metadata.create_all(sync.connection()))


def job_row(run_id: str, owner: str, key: str, status: str) -> dict[str, Any]:
    """A job row of node `key` of the run, attempt 1 (foreign keys unchecked: see `seed`)."""
    return {
        "id": str(uuid.uuid4()),
        "function_id": "f",
        "function_version_id": "fv",
        "package_id": "p",
        "user_id": owner,
        "status": status,
        "inputs": {"x": 1},
        "resolved_inputs": {"x": 1},
        "outputs": {"y": 2} if status == "success" else None,
        "cache_hit": False,
        "workflow_run_id": run_id,
        "node_key": key,
        "attempt": 1,
        "deliveries": 1,
        "created_at": NOW,
        "started_at": NOW,
        "finished_at": NOW if status == "success" else None,
    }


def _key(chain: int, i: int) -> str:
    return f"c{chain}n{i}"


async def seed(
    session: AsyncSession, chains: int, length: int, *, done: int | None = None
) -> SeededRun:
    """A run of `chains` chains of `length`; `done` nodes of each succeeded (half when None;
    all: a finished run), the next one running, and every other chain's next-but-one started
    by its chain worker. Foreign keys are not checked (`session_replication_role`): the rows
    they point at do not matter to the plans."""
    await session.execute(text("SET LOCAL session_replication_role = replica"))
    finished = length // 2 if done is None else done
    owner, workflow_id, run_id = (str(uuid.uuid4()) for _ in range(3))
    revision = finished + 1
    await session.execute(
        insert(cast(Table, Workflow.__table__)),
        [
            {
                "id": workflow_id,
                "slug": f"plans-{workflow_id}",
                "name": "plans",
                "owner_id": owner,
                "organization_id": None,
                "visibility": "private",
                "latest_version": 1,
                "created_at": NOW,
                "updated_at": NOW,
            }
        ],
    )
    status = "completed" if finished >= length else "running"
    await session.execute(
        insert(cast(Table, WorkflowRun.__table__)),
        [
            {
                "id": run_id,
                "workflow_id": workflow_id,
                "workflow_version_id": str(uuid.uuid4()),
                "user_id": owner,
                "status": status,
                "inputs": {"x": 1},
                "resolved_inputs": {"x": 1},
                "plan_snapshot": {"chains": [], "waves": []},
                "revision": revision,
                "started_at": NOW,
            }
        ],
    )
    nodes: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    starts: list[dict[str, Any]] = []

    def job(key: str, job_status: str) -> str:
        row = job_row(run_id, owner, key, job_status)
        jobs.append(row)
        return str(row["id"])

    for c in range(chains):
        for i in range(length):
            key = _key(c, i)
            row: dict[str, Any] = {
                "run_id": run_id,
                "node_key": key,
                "kind": "function",
                "status": "pending",
                "job_id": None,
                "outputs": None,
                "attempt": 0,
                "revision": 0,
            }
            if i < finished:
                row.update(
                    status="success", job_id=job(key, "success"), outputs={"y": 2}, attempt=1
                )
                row["revision"] = i + 1
            elif i == finished:
                row.update(status="running", job_id=job(key, "running"), attempt=1)
                row["revision"] = revision
            elif i == finished + 1 and c % 2 == 0:
                starts.append({"run_id": run_id, "job_id": job(key, "running")})
            nodes.append(row)
    await session.execute(insert(cast(Table, NodeRow.__table__)), nodes)
    for at in range(0, len(jobs), 5000):
        await session.execute(insert(cast(Table, Job.__table__)), jobs[at : at + 5000])
    if starts:
        await session.execute(insert(cast(Table, ChainStart.__table__)), starts)
    return SeededRun(run_id, chains, length, revision)


def _submitted_job(run: SeededRun, chain: int, i: int) -> dict[str, Any]:
    """A job row as a tick inserts it (foreign keys are not checked here: see `seed`)."""
    return {
        "id": str(uuid.uuid4()),
        "created_at": NOW,
        "function_id": "f",
        "function_version_id": "fv",
        "package_id": "p",
        "user_id": "u",
        "inputs": {"x": float(chain)},
        "resolved_inputs": {"x": float(chain)},
        "workflow_run_id": run.run_id,
        "node_key": _key(chain, i),
        "attempt": 9,
        "status": "queued",
        "cache_hit": False,
        "deliveries": 1,
        "logs": None,
        "started_at": None,
        "finished_at": None,
    }


Statement = tuple[str, str, dict[str, Any]]
"""(label, SQL as sent, its plan)."""


Explain = Callable[[AsyncSession, str, Any], Awaitable[dict[str, Any]]]
"""Plans one statement as sent: `explain` (PostgreSQL's custom plan for its parameters) or
`explain_generic` (the plan it caches for a prepared statement)."""


async def hot_statements(
    session: AsyncSession,
    run: SeededRun,
    *,
    planner: Explain | None = None,
    labels: Container[str] | None = None,
) -> list[Statement]:
    """Every statement the hot paths send for `run`, in order, labelled by what sends it, each
    with its plan as PostgreSQL runs it right after the call that sent it (by `planner`,
    `explain` by default; only the statements of `labels` when given: all are sent)."""
    plan_of = explain if planner is None else planner
    sent: list[tuple[str, str, Any]] = []
    planned: list[Statement] = []
    current = [""]

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        if not statement.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK", "SET")):
            sent.append((current[0], statement, parameters))

    runs = RunRepository.from_session(session)
    chains = ChainRepository.from_session(session)
    jobs = JobStoreRepository.from_session(session)
    middle = run.length // 2 + 1
    rest = [_key(0, i) for i in range(middle, run.length)][:10]
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
    job_ids: list[str] = []

    async def running() -> None:
        job_ids.extend(job_id for job_id, _ in await runs.running_jobs(run.run_id))

    async def insert_jobs() -> None:
        # Rolled back: its plan is taken by running it again.
        nested = await session.begin_nested()
        try:
            await JobRepository.from_session(session).insert_many(
                [_submitted_job(run, c, middle) for c in range(run.chains)]
            )
        finally:
            await nested.rollback()

    async def write_tick() -> None:
        # The run's row by key first (not the statement planned for what it writes).
        found = await session.get(WorkflowRun, run.run_id)
        assert found is not None
        fields = {name: getattr(found, name) for name in RUN_FIELDS}
        await runs.write_tick(
            found.id, {_key(0, 0): NodeState("success")}, fields | {"revision": run.revision + 1}
        )

    calls += [
        ("tick: run and its work, unlocked", lambda: runs.read(run.run_id, work=True)),
        ("tick: lock the run with its work", lambda: runs.read(run.run_id, "skip")),
        ("tick: plan", lambda: runs.plan_snapshot(run.run_id)),
        (
            "tick: write changed states",
            lambda: runs.write_states(
                run.run_id, {_key(0, 0): NodeState("success")}, run.revision + 1
            ),
        ),
        (
            "tick: write submitted states",
            lambda: runs.write_states(
                run.run_id,
                {
                    _key(c, middle): NodeState("running", job_id=f"j{c}", attempt=1, started_at=NOW)
                    for c in range(run.chains)
                },
                run.revision + 1,
            ),
        ),
        ("tick: write changed states and the run", write_tick),
        ("tick: insert submitted jobs", insert_jobs),
        ("tick?since: changed states", lambda: runs.states_since(run.run_id, run.revision - 1)),
        ("wait: running jobs", running),
        ("chain: place", lambda: chains.place(job_ids[0])),
        ("chain: run", lambda: chains.run(run.run_id)),
        ("chain: lock the run", lambda: chains.lock_run(run.run_id)),
        ("chain: first queued", lambda: chains.first_queued(run.run_id, rest)),
        ("chain: node states", lambda: chains.node_states(run.run_id, rest)),
        ("job: claim", lambda: jobs.claim(job_ids[0], NOW, "plan-lease")),
        (
            "job: finish",
            lambda: jobs.finish(
                Finish(job_ids[1], Outcome("success", {"y": 1}, None, ""), "plan-lease"), NOW
            ),
        ),
        ("job: heartbeat", lambda: jobs.heartbeat(["plan-lease"], NOW)),
    ]
    engine = session.bind
    sync_engine = engine.sync_engine  # type: ignore[union-attr]
    event.listen(sync_engine, "before_cursor_execute", record)
    try:
        for label, call in calls:
            current[0] = label
            await call()
            event.remove(sync_engine, "before_cursor_execute", record)
            for _, statement, parameters in sent:
                if labels is None or label in labels:
                    plan = await plan_of(session, statement, parameters)
                    planned.append((label, statement, plan))
            sent.clear()
            event.listen(sync_engine, "before_cursor_execute", record)
    finally:
        event.remove(sync_engine, "before_cursor_execute", record)
    return planned


async def explain(session: AsyncSession, statement: str, parameters: Any) -> dict[str, Any]:
    """PostgreSQL's plan of one statement as sent (its first row of parameters, for a batch),
    run (`ANALYZE`, in a savepoint rolled back after) to count the rows it really reads."""
    if isinstance(parameters, list):
        parameters = parameters[0]
    nested = await session.begin_nested()
    try:
        connection = await session.connection()
        result = await connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, tuple(parameters or ())
        )
        raw = result.scalar_one()
    finally:
        await nested.rollback()
    return _plan(raw)


async def explain_generic(
    session: AsyncSession, statement: str, parameters: Sequence[Any]
) -> dict[str, Any]:
    """The plan PostgreSQL keeps for a prepared statement once it goes generic (after five
    executions, as for asyncpg's cached statements): planned without the parameters' values,
    on the statistics of that moment, and run (`ANALYZE`, in a savepoint rolled back after)."""
    name = f"generic_{uuid.uuid4().hex}"  # PREPARE outlives a rollback: a name per call
    return await _execute_generic(session, name, parameters, prepare=statement, keep=False)


class CachedGeneric:
    """Plans each statement by the generic plan PostgreSQL made for it the first time this
    planner saw it, kept since, as it keeps one for a prepared statement of a pooled
    connection: made while the tables were small, it is used while they grow (until an ANALYZE
    or other change of a table's definition). Each plan is run (`ANALYZE`, in a savepoint
    rolled back after). `seed`'s `session_replication_role` keeps the plans (it flushes them
    only when it changes)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    async def __call__(
        self, session: AsyncSession, statement: str, parameters: Sequence[Any]
    ) -> dict[str, Any]:
        name = self.names.get(statement)
        if name is not None:
            return await _execute_generic(session, name, parameters)
        name = self.names[statement] = f"cached_{uuid.uuid4().hex}"
        return await _execute_generic(session, name, parameters, prepare=statement)


async def _execute_generic(
    session: AsyncSession,
    name: str,
    parameters: Sequence[Any],
    *,
    prepare: str | None = None,
    keep: bool = True,
) -> dict[str, Any]:
    """The generic plan of the prepared statement `name` (PREPAREd first as `prepare` when
    given; DEALLOCATEd after unless `keep`: PREPARE outlives a rollback), run on `parameters`
    (`ANALYZE`, in a savepoint rolled back after). Its first EXECUTE makes the plan."""
    nested = await session.begin_nested()
    try:
        connection = await session.connection()
        await connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        if prepare is not None:
            await connection.exec_driver_sql(f"PREPARE {name} AS {prepare}")
        arguments = ", ".join(_literal(value) for value in parameters)
        result = await connection.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({arguments})"
        )
        raw = result.scalar_one()
        if not keep:
            await connection.exec_driver_sql(f"DEALLOCATE {name}")
    finally:
        await nested.rollback()
    return _plan(raw)


def _plan(raw: Any) -> dict[str, Any]:
    """The top plan node of an `EXPLAIN (FORMAT JSON)` answer."""
    document = json.loads(raw) if isinstance(raw, str) else raw
    plan: dict[str, Any] = document[0]["Plan"]
    return plan


def _literal(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "ARRAY[" + ", ".join(_literal(v) for v in value) + "]::varchar[]"
    if isinstance(value, bool | int):
        return str(int(value))
    escaped = str(value).replace("'", "''")
    return f"'{escaped}'"


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", ()):
        found += nodes(child)
    return found


def seq_scans(plan: dict[str, Any]) -> list[str]:
    """The big tables a plan reads whole."""
    return [
        n["Relation Name"]
        for n in nodes(plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG_TABLES
    ]


def rows_read(plan: dict[str, Any], tables: Container[str] | None = None) -> int:
    """Rows the plan's scans (of `tables` when given) really read (returned or filtered out),
    over all their loops: the work a statement does, which must follow what changed, not the
    run's size."""
    total = 0
    for n in nodes(plan):
        relation = n.get("Relation Name")
        if relation is not None and n["Node Type"] != "ModifyTable":
            if tables is not None and relation not in tables:
                continue
            seen = n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
            seen += n.get("Rows Removed by Index Recheck", 0)
            total += int(seen * n.get("Actual Loops", 1))
    return total


def describe(plan: dict[str, Any], depth: int = 0) -> str:
    """The plan as indented lines: node, relation and index, estimated cost and rows."""
    relation = plan.get("Relation Name")
    index = plan.get("Index Name")
    where = f" on {relation}" if relation else ""
    where += f" using {index}" if index else ""
    line = (
        f"{'  ' * depth}{plan['Node Type']}{where} "
        f"(cost={plan['Startup Cost']}..{plan['Total Cost']} rows={plan['Plan Rows']}) "
        f"(actual rows={plan.get('Actual Rows')} loops={plan.get('Actual Loops')} "
        f"removed={plan.get('Rows Removed by Filter', 0)})"
    )
    return "\n".join([line, *(describe(child, depth + 1) for child in plan.get("Plans", ()))])
