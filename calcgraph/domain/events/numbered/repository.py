"""A unit of work's events written with their positions by one statement (PostgreSQL): on
their own (`INSERT_NUMBERED_POSTGRES`, `EventRepository.insert_numbered`), or by the statement
that makes the unit's last change, as its CTEs: a text statement's (`numbered_with`, the
worker's folded transitions) or a Core statement's (`with_numbered`, a tick's write)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, DateTime, String, Text, bindparam, column, text
from sqlalchemy.dialects.postgresql import ARRAY

from calcgraph.domain.events.statements.repository import SEQUENCE

# A unit's own events written with their positions (`insert_numbered`): the cursor's row moved
# past them (created at their count when missing) and locked to the commit, then each event
# its place after the cursor's old position. PostgreSQL: one statement (the cursor's upsert as
# a data-modifying CTE, the events from arrays); SQLite: the upsert, then the rows.
_MOVE_CURSOR = """
    INSERT INTO event_cursors (name, position) VALUES (:name, :count)
    ON CONFLICT (name) DO UPDATE SET position = event_cursors.position + excluded.position
    RETURNING position - :count AS base
"""
_COUNT = bindparam("count", type_=BigInteger)
_EVENT_ARRAYS = (
    bindparam("ids", type_=ARRAY(String)),
    bindparam("types", type_=ARRAY(String)),
    bindparam("subjects", type_=ARRAY(String)),
    bindparam("kinds", type_=ARRAY(String)),
    bindparam("recorded", type_=ARRAY(DateTime(timezone=True))),
    bindparam("datas", type_=ARRAY(Text)),
    bindparam("runs", type_=ARRAY(String)),
)
"""The columns of events written from arrays, one array a column."""
_WRITE_ROWS = """
    INSERT INTO events (id, position, type, subject, subject_kind, recorded_at, data, run_id)
    SELECT e.id, moved.base + e.n, e.type, e.subject, e.subject_kind, e.recorded_at,
        CAST(e.data AS JSONB), e.run_id
    FROM moved, unnest(:ids, :types, :subjects, :kinds, :recorded, :datas, :runs)
        WITH ORDINALITY AS e(id, type, subject, subject_kind, recorded_at, data, run_id, n)
"""
INSERT_NUMBERED_POSTGRES = text(f"WITH moved AS ({_MOVE_CURSOR}) {_WRITE_ROWS}").bindparams(
    _COUNT, *_EVENT_ARRAYS
)
MOVE_CURSOR_SQLITE = text(_MOVE_CURSOR).bindparams(_COUNT)

# A unit's held events numbered by the statement that makes its last change (PostgreSQL,
# `numbered_with`): the change as a data-modifying CTE (`source`), the events it adds
# (`adding`: a SELECT of the held rows' columns and a `slot`, reading the CTE), and the held
# rows, each in its `slot`; the events take the next positions in slot order (then by subject,
# for the events in one slot). The cursor's
# upsert reads the events, so the change (its rows locked) is made before the cursor's row is
# locked: the cursor stays the last row the unit locks.
_HELD_ROWS = """
    SELECT h.id, h.type, h.subject, h.subject_kind, h.recorded_at, CAST(h.data AS JSONB) AS data,
        h.run_id, h.slot
    FROM unnest(:ids, :types, :subjects, :kinds, :recorded, :datas, :runs, :slots)
        AS h(id, type, subject, subject_kind, recorded_at, data, run_id, slot)
"""


def numbered_with(source: str, adding: str, answer: str) -> str:
    """The text of a statement that makes a change (`source`, CTEs), writes the unit's held
    events and those the change adds (`adding`) with the next positions, and answers
    `answer` (a SELECT reading the change's CTE); bound by `numbered_params`."""
    return f"""
    WITH {source}, pending AS ({_HELD_ROWS} UNION ALL {adding}
    ), numbered AS (
        SELECT pending.*, row_number() OVER (ORDER BY slot, subject) AS n FROM pending
    ), moved AS (
        INSERT INTO event_cursors (name, position)
        SELECT :name, count(*) FROM numbered HAVING count(*) > 0
        ON CONFLICT (name) DO UPDATE SET position = event_cursors.position + excluded.position
        RETURNING position - (SELECT count(*) FROM numbered) AS base
    ), written AS (
        INSERT INTO events (id, position, type, subject, subject_kind, recorded_at, data, run_id)
        SELECT e.id, moved.base + e.n, e.type, e.subject, e.subject_kind, e.recorded_at, e.data,
            e.run_id
        FROM moved, numbered AS e
    )
    {answer}
    """


NUMBERED_BINDS = (*_EVENT_ARRAYS, bindparam("slots", type_=ARRAY(BigInteger)))
"""The bound parameters of a `numbered_with` statement's held rows."""


def numbered_params(held: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The parameters of a `numbered_with` statement for these held rows, each in its slot."""
    return {
        "name": SEQUENCE,
        "ids": [row["id"] for _, row in held],
        "types": [row["type"] for _, row in held],
        "subjects": [row["subject"] for _, row in held],
        "kinds": [row["subject_kind"] for _, row in held],
        "recorded": [row["recorded_at"] for _, row in held],
        "datas": [json.dumps(row["data"]) for _, row in held],
        "runs": [row.get("run_id") for _, row in held],
        "slots": [slot for slot, _ in held],
    }


def rows_params(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of `INSERT_NUMBERED_POSTGRES` (and `with_numbered`) for these rows
    (`event_row`s), numbered in their order."""
    return {
        "name": SEQUENCE,
        "count": len(rows),
        "ids": [row["id"] for row in rows],
        "types": [row["type"] for row in rows],
        "subjects": [row["subject"] for row in rows],
        "kinds": [row["subject_kind"] for row in rows],
        "recorded": [row["recorded_at"] for row in rows],
        "datas": [json.dumps(row["data"]) for row in rows],
        "runs": [row.get("run_id") for row in rows],
    }


@functools.cache
def with_numbered(statement: Any) -> Any:
    """`statement` (Core, data-modifying: the unit's last change) writing the unit's held
    events too, with the next positions: the cursor's upsert and the events' INSERT as CTEs of
    it, bound by `rows_params`. Built once per statement. The cursor's row is locked in the
    same statement as the change's rows (PostgreSQL runs the CTEs with it); the caller's rows
    must be ones no unit holding the cursor waits for (a tick's: under its run's lock, which
    every other writer of them takes before it numbers its events)."""
    moved = text(_MOVE_CURSOR).bindparams(_COUNT).columns(column("base", BigInteger))
    written = text(_WRITE_ROWS).bindparams(*_EVENT_ARRAYS).columns()
    return statement.add_cte(moved.cte("moved")).add_cte(written.cte("written"))
