"""The statements of every tick, built once (building one costs more than running it), and
the row shapes they read (`calcgraph.domain.runs.repository` runs them)."""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    case,
    delete,
    exists,
    func,
    literal_column,
    null,
    or_,
    select,
    true,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy import (
    cast as sql_cast,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from calcgraph.db.base import JSONType
from calcgraph.db.dialect import by_keys, locked, rows_after, update_from_arrays
from calcgraph.domain.answers import ANSWER_MAX_BYTES, LISTED_VALUE_MAX_BYTES
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import ChainStart, WorkflowRun
from calcgraph.domain.runs.models import NodeState as NodeRowModel
from calcgraph.domain.runs.state import NODE_STATE_FIELDS, NodeState
from calcgraph.domain.runs.views import RunRow, left_out
from calcgraph.domain.workflows.models import Workflow

NODES = cast(Table, NodeRowModel.__table__)
RUNS = cast(Table, WorkflowRun.__table__)
JOBS = cast(Table, Job.__table__)
WORKFLOWS = cast(Table, Workflow.__table__)
# A node's key and its state (`state` reads them): table columns, as below.
STATE_COLUMNS = tuple(NODES.c[name] for name in ("node_key", *NODE_STATE_FIELDS))
# The run's row as a `RunRow` (its columns in the same order), then its workflow's access
# facts (`WorkflowFacts`): table columns, not the models', so that the session runs the
# statements as Core (no ORM entity to load, no identity map to fill).
_TERMINAL_HELD = RUNS.c.terminal_outputs_bytes > ANSWER_MAX_BYTES
_HELD_RUN_COLUMNS: dict[str, Any] = {
    "terminal_outputs": type_coerce(
        case((_TERMINAL_HELD, null()), else_=RUNS.c.terminal_outputs), JSONType
    ).label("terminal_outputs"),
    "terminal_outputs_held": _TERMINAL_HELD.label("terminal_outputs_held"),
}
"""Terminal outputs over the answer bound as stored (a run of three 8 MiB nodes) are shown by
no answer of the run (`views.shown`) and used by no tick of it (it ended): they stay in the
database rather than be decoded on the event loop at every read of the row (contract 8b)."""
RUN_COLUMNS: tuple[Any, ...] = tuple(
    _HELD_RUN_COLUMNS[f.name] if f.name in _HELD_RUN_COLUMNS else RUNS.c[f.name]
    for f in fields(RunRow)
)
FACT_COLUMNS = (
    WORKFLOWS.c.owner_id,
    WORKFLOWS.c.organization_id,
    WORKFLOWS.c.visibility,
    WORKFLOWS.c.slug,
)
AFTER_FACTS = len(RUN_COLUMNS) + len(FACT_COLUMNS)
"""The index of the first column after the run's row and its facts."""
# The statements of every tick, built once (building one costs more than running it).
RUN_WITH_FACTS = (
    select(*RUN_COLUMNS, *FACT_COLUMNS)
    .join(WORKFLOWS, WORKFLOWS.c.id == RUNS.c.workflow_id)
    .where(RUNS.c.id == bindparam("run_id"))
)
CHAIN_STARTS = cast(Table, ChainStart.__table__)
# Each hot statement reaches its rows by key or by an index whatever the statistics say (fresh
# tables or after ANALYZE): a join let PostgreSQL pick a scan of the run's node rows or of every
# job, so the tick's reads are split into steps that each have one possible plan
# (`tests/runs/test_tick_plans.py` runs EXPLAIN on them at 10,000 nodes).
RUNNING = select(NODES.c.job_id).where(
    NODES.c.run_id == bindparam("run_id"), NODES.c.status == "running"
)
FINISHED = ("success", "failed")
JOB_COLUMNS = (
    JOBS.c.id,
    JOBS.c.status,
    JOBS.c.outputs,
    JOBS.c.error,
    JOBS.c.finished_at,
    JOBS.c.node_key,
    JOBS.c.attempt,
    JOBS.c.started_at,
)
STARTED_IDS = select(CHAIN_STARTS.c.job_id).where(CHAIN_STARTS.c.run_id == bindparam("run_id"))
# The chain starts a tick adopted, by the ids it read (see `locked_run_with_work`).
ADOPTED = delete(CHAIN_STARTS).where(
    CHAIN_STARTS.c.run_id == bindparam("run_id"),
    CHAIN_STARTS.c.job_id.in_(bindparam("job_ids", expanding=True)),
)
WRITE_STATE = (
    update(NODES)
    .where(NODES.c.run_id == bindparam("k_run_id"), NODES.c.node_key == bindparam("k_node_key"))
    .values(
        {
            column: bindparam(f"v_{column}", type_=NODES.c[column].type)
            for column in (*NODE_STATE_FIELDS, "revision")
        }
    )
)


# The run fields every tick that changes something writes.
RUN_FIELDS = (
    "status",
    "completed_at",
    "terminal_outputs",
    "error_message",
    "first_failed_node_key",
    "retry_at",
    "revision",
)
WRITE_RUN = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("k_id"))
    .values({name: bindparam(f"v_{name}", type_=RUNS.c[name].type) for name in RUN_FIELDS})
)


def _is_json(name: str) -> bool:
    return isinstance(NODES.c[name].type, JSON)


def _unnested(name: str) -> Any:
    kind = Text() if _is_json(name) else NODES.c[name].type
    return func.unnest(bindparam(f"a_{name}", type_=ARRAY(kind))).label(name)


# PostgreSQL: a changing tick's node rows and its run's fields in one statement, the rows'
# UPDATE (each row by its key, every column from an array, JSON as JSON text) a data-modifying
# CTE of `WRITE_RUN`: they were an executemany by key and the run's UPDATE, two round trips.
# The node rows' columns are `WRITE_STATE`'s, at the run's new revision (`v_revision`).
STATE_ARRAYS = ("node_key", *NODE_STATE_FIELDS)
_CHANGED = select(*(_unnested(name) for name in STATE_ARRAYS)).subquery("changed")
WRITE_TICK = WRITE_RUN.add_cte(
    update(NODES)
    .where(NODES.c.run_id == bindparam("k_id"), NODES.c.node_key == _CHANGED.c.node_key)
    .values(
        {
            name: sql_cast(_CHANGED.c[name], JSONB) if _is_json(name) else _CHANGED.c[name]
            for name in NODE_STATE_FIELDS
        }
        | {"revision": bindparam("v_revision", type_=Integer)}
    )
    .cte("changed_states")
)


@functools.cache
def write_tick_with(jobs_insert: Any) -> Any:
    """`WRITE_TICK` with the INSERT of the jobs the tick submitted as a CTE of its own: one
    statement, one round trip, for the whole write of a tick that submits (PostgreSQL runs
    every data-modifying CTE, referenced or not). One per shape of the jobs' INSERT (which
    of its columns are arrays), built once."""
    return WRITE_TICK.add_cte(jobs_insert.cte("submitted_jobs"))


# The nodes a tick submitted (running, a new job, nothing else): one UPDATE from arrays when
# there are more than `FEW`. Up to that many, the executemany by primary key (one round trip,
# each row by key whatever the plan) costs less than the two statements that must surround
# the UPDATE from arrays (`custom_plans`): a diamond's second tick submits two nodes.
FEW = 8
START_MANY = update_from_arrays(
    NODES, {"run_id": "k_run_id"}, "node_key", {"job_id": String(), "attempt": Integer()}
).values(
    status="running",
    outputs=None,
    error=None,
    started_at=bindparam("v_started_at", type_=NODES.c.started_at.type),
    finished_at=None,
    retry_at=None,
    revision=bindparam("v_revision", type_=Integer),
)


@functools.cache
def run_with_work(dialect_name: str) -> Any:
    """The run row with its access facts, unlocked, and whether a tick has work: a job of a
    running node finished (the node rows by the (run, status) index, their jobs by key), or a
    chain worker started one (`chain_starts` by its key). One statement."""
    finished = by_keys(
        dialect_name, (JOBS.c.id,), JOBS.c.id, RUNNING, JOBS.c.status.in_(FINISHED)
    ).exists()
    started = exists().where(CHAIN_STARTS.c.run_id == bindparam("run_id"))
    return RUN_WITH_FACTS.add_columns(or_(finished, started))


def just_started(state: NodeState) -> bool:
    return (
        state.status == "running"
        and state.job_id is not None
        and state.outputs is None
        and state.error is None
        and state.finished_at is None
    )


@functools.cache
def states_since(dialect_name: str) -> Any:
    """The node states of the run bound to `run_id` written after the revision bound to
    `since`: by the (run, revision) index, each revision up to the run's (no tick writes a
    node state at a revision its run has not reached). For an answer only: outputs over
    64 KiB held (`HELD_STATE_COLUMNS`)."""
    until = select(RUNS.c.revision).where(RUNS.c.id == bindparam("run_id")).scalar_subquery()
    return rows_after(
        dialect_name,
        HELD_STATE_COLUMNS,
        NODES.c.revision,
        bindparam("since", type_=Integer),
        until,
        NODES.c.run_id == bindparam("run_id"),
    )


@functools.cache
def jobs_of_running(dialect_name: str) -> Any:
    """(id, status) of the jobs the running nodes of the run bound to `run_id` wait on, by
    primary key."""
    return by_keys(dialect_name, (JOBS.c.id, JOBS.c.status), JOBS.c.id, RUNNING)


@functools.cache
def work(dialect_name: str) -> Any:
    """What a locked tick reconciles, in one statement: the finished jobs the running nodes of
    the run bound to `run_id` wait on (`started` 0), and every job chain workers started for
    it (`started` 1, listed in `chain_starts`). Each branch reads the jobs by primary key."""
    finished = by_keys(
        dialect_name,
        (*JOB_COLUMNS, literal_column("0").label("started")),
        JOBS.c.id,
        RUNNING,
        JOBS.c.status.in_(FINISHED),
    )
    started = by_keys(
        dialect_name,
        (*JOB_COLUMNS, literal_column("1").label("started")),
        JOBS.c.id,
        STARTED_IDS,
    )
    return union_all(finished, started)


@functools.cache
def locked_run_with_work(dialect_name: str, skip_locked: bool) -> Any:
    """The locked tick's one read: the run row (`RUN_WITH_FACTS`), locked, with its
    access facts and its `work` as the rows of an outer join (one row with no work: the work
    columns NULL). PostgreSQL takes the lock once, in a materialized CTE that answers the run's
    row and facts (none when SKIP LOCKED left it out): a row lock is taken per row a statement
    returns, and with the work's rows joined to the locked table, SKIP LOCKED left out those
    returned while a chain worker still held the lock (a tick that saw a node's end without
    its successor's start submitted the successor twice). SQLite's write session holds the
    database's lock already.

    PostgreSQL reads the work in the statement's snapshot, taken before the lock: when the
    lock's last holder committed in between, the run row is its version (the lock reads the
    latest) and the work may lack what that holder wrote. What it lacks comes to the next
    tick, never twice: a chain worker writes a link's end and its next step's start in one
    commit (`ChainService.record`), so both are seen or neither (the next step's node is not
    ready while its predecessor still runs), and the tick deletes only the chain starts it
    read (`ADOPTED`)."""
    found = work(dialect_name).subquery("work")
    if dialect_name != "postgresql":
        return RUN_WITH_FACTS.outerjoin(found, true()).add_columns(*found.c)
    row = RUN_WITH_FACTS.with_only_columns(
        *RUN_COLUMNS, *(c.label(f"f_{c.key}") for c in FACT_COLUMNS)
    )
    once = locked(dialect_name, row, of=RUNS, skip_locked=skip_locked)
    cte = once.cte("locked_run").prefix_with("MATERIALIZED")
    return select(*cte.c, *found.c).select_from(cte).outerjoin(found, true())


_BIG = NODES.c.outputs_bytes > LISTED_VALUE_MAX_BYTES
HELD_STATE_COLUMNS = (
    *STATE_COLUMNS[:3],
    type_coerce(case((_BIG, null()), else_=NODES.c.outputs), JSONType).label("outputs"),
    *STATE_COLUMNS[4:],
    _BIG.label("outputs_held"),
)
"""`STATE_COLUMNS` for an answer, which never shows outputs over 64 KiB (contract 8b): those
stay in the database (`outputs_held`, then `held_state`), neither sent nor decoded."""


def held_state(row: Any) -> NodeState:
    """A node state read through `HELD_STATE_COLUMNS`: its outputs left out when held."""
    return left_out(state(row)) if row[-1] else state(row)


def state(row: Any) -> NodeState:
    return NodeState(
        status=row[1],
        job_id=row[2],
        outputs=row[3],
        error=row[4],
        attempt=row[5],
        started_at=row[6],
        finished_at=row[7],
        retry_at=row[8],
        attempts=tuple(row[9] or ()),
        reused=bool(row[10]),
    )
