"""All SQL of the event log: recording, giving positions in commit order, reading a page
after a position under the subject's visibility rules (in SQL, so hidden events never load),
and pruning what is older than the retention."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Row,
    Table,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    update,
)

from calcgraph.db.base import RepositoryBase
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.events.catalog import TypeFilter
from calcgraph.domain.events.models import Event, EventCursor
from calcgraph.domain.events.numbered.repository import (
    INSERT_NUMBERED_POSTGRES,
    MOVE_CURSOR_SQLITE,
    rows_params,
)
from calcgraph.domain.events.statements.repository import (
    HEAD,
    LAST_POSITION,
    PROBED_SPAN,
    SEQUENCE,
    UNSEQUENCED,
    VISIBLE_RUNS,
    page_statement,
    type_clause,
    viewer,
    visible_event_clause,
)
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import WorkflowRun

_EVENTS = cast(Table, Event.__table__)
_JOBS = cast(Table, Job.__table__)
_INSERT = insert(_EVENTS)
# One advisory lock key for the sequencer on PostgreSQL (SQLite's writers are serial anyway).
_SEQUENCER_LOCK = 0x63616C63_65767473  # "calcevts"
SEQUENCE_BATCH = 2000
# PostgreSQL's sequencing in one statement, the advisory lock held: the oldest unnumbered
# events (at most `batch`), the cursor moved past them (created at their count when missing,
# and not written when there are none), each event its place after the cursor's old position.
_SEQUENCE_POSTGRES = text(
    """
    WITH pending AS (
        SELECT id, row_number() OVER (ORDER BY recorded_at, id) AS n
        FROM (
            SELECT id, recorded_at FROM events WHERE position IS NULL
            ORDER BY recorded_at, id LIMIT :batch
        ) AS oldest
    ), moved AS (
        INSERT INTO event_cursors (name, position)
        SELECT :name, count(*) FROM pending HAVING count(*) > 0
        ON CONFLICT (name) DO UPDATE SET position = event_cursors.position + excluded.position
        RETURNING position - (SELECT count(*) FROM pending) AS base
    )
    UPDATE events SET position = moved.base + pending.n
    FROM pending, moved WHERE events.id = pending.id
    RETURNING events.id
    """
)


class EventRepository(RepositoryBase[Event]):
    model = Event

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """Rows of `id, type, subject, subject_kind, recorded_at, data, run_id`: one
        executemany."""
        if rows:
            await self.session.execute(_INSERT, list(rows))

    async def insert_numbered(self, rows: Sequence[dict[str, Any]]) -> None:
        """A unit's events (`insert_many`'s rows) with the next positions, in their order, as
        its last statement. The cursor's row, locked from here to the commit, is the
        sequencer's lock: the next unit to number waits for this one's commit, so positions
        commit in their order (a reader past N never misses an event numbered later). Each
        unit locks it last, after every row it changes, so no unit holds it while it waits
        for another (the sequencer of `sequence`, for events written unnumbered, takes its
        advisory lock, then this row)."""
        if not rows:
            return
        if self.session.get_bind().dialect.name == "postgresql":
            await self.session.execute(INSERT_NUMBERED_POSTGRES, rows_params(rows))
            return
        params = {"name": SEQUENCE, "count": len(rows)}
        base = int((await self.session.execute(MOVE_CURSOR_SQLITE, params)).scalar_one())
        await self.session.execute(
            _INSERT, [{**row, "position": base + i} for i, row in enumerate(rows, 1)]
        )

    async def job_rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """What the job events say of these jobs, as they are in this unit of work."""
        if not ids:
            return []
        columns = (
            "id",
            "function_id",
            "function_version_id",
            "workflow_run_id",
            "node_key",
            "status",
            "error",
        )
        rows = await self.session.execute(
            select(*(_JOBS.c[name] for name in columns)).where(_JOBS.c.id.in_(sorted(set(ids))))
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]

    async def unsequenced(self) -> bool:
        found = await self.session.scalar(UNSEQUENCED)
        return found is not None

    async def head(self) -> tuple[int, bool]:
        """The log's end (`last_position`) and whether events wait for a position
        (`unsequenced`), in one statement: a long-poll's page asks both before each read."""
        row = (await self.session.execute(HEAD)).one()
        return int(row[0] or 0), bool(row[1])

    async def sequence(self) -> int:
        """Give the events committed without a position the next ones, oldest first; the
        caller's unit of work commits them. One sequencer at a time (PostgreSQL: an advisory
        lock held to the commit; SQLite: its one writer), so positions grow in the order the
        sequencer saw the events committed: a reader past position N never misses an event
        numbered later. Returns how many were numbered."""
        if self.session.get_bind().dialect.name == "postgresql":
            await self.session.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SEQUENCER_LOCK}
            )
            # Under the lock, one statement: a sequencing after every commit that recorded
            # events (a job's start, its end) was five round trips of its own.
            numbered = await self.session.execute(
                _SEQUENCE_POSTGRES, {"batch": SEQUENCE_BATCH, "name": SEQUENCE}
            )
            return len(numbered.all())
        ids = list(
            await self.session.scalars(
                select(Event.id)
                .where(Event.position.is_(None))
                .order_by(Event.recorded_at, Event.id)
                .limit(SEQUENCE_BATCH)
            )
        )
        if not ids:
            return 0
        # The high-water mark lives in `event_cursors`, not max(position): pruning every
        # event must not hand out positions a reader has already passed.
        base = await self.cursor(SEQUENCE)
        await self.session.execute(
            update(_EVENTS)
            .where(_EVENTS.c.id == bindparam("b_id"))
            .values(position=bindparam("b_position")),
            [{"b_id": event_id, "b_position": base + i} for i, event_id in enumerate(ids, 1)],
            execution_options={"synchronize_session": False},
        )
        await self.session.execute(
            update(EventCursor)
            .where(EventCursor.name == SEQUENCE)
            .values(position=base + len(ids))
            .execution_options(synchronize_session=False)
        )
        return len(ids)

    async def digest(self, after: int, upto: int) -> list[tuple[str, str | None, int]]:
        """(type, run, last position) of the events numbered in (after, upto], one row per
        type and run: what a re-check needs to know whom they may concern, not the events."""
        rows = await self.session.execute(
            select(Event.type, Event.run_id, func.max(Event.position))
            .where(Event.position > after, Event.position <= upto)
            .group_by(Event.type, Event.run_id)
        )
        return [(str(t), r, int(p or 0)) for t, r, p in rows]

    async def last_position(self) -> int:
        found = await self.session.scalar(LAST_POSITION)
        return int(found or 0)

    async def page(
        self,
        principal: Principal | None,
        after: int,
        limit: int,
        types: TypeFilter,
        subject: str | None,
        run: str | None = None,
        upto: int | None = None,
        end: int | None = None,
    ) -> list[Row[Any]]:
        """Sequenced events after `after` (and at most `upto`), in position order, that
        `principal` may see (None: every event, for the fan-out, which checks each webhook
        owner's sight itself); with `run`, only that run's own and its jobs' (still each by its
        subject's rule). `end`: the log's end as the caller read it; a page read from near it
        probes each event's subject rather than hash the reader's history (`PROBED_SPAN`)."""
        query = page_statement(
            types,
            upto is not None,
            principal is None or principal.is_admin,
            subject is not None,
            run is not None,
            end is not None and end - after <= PROBED_SPAN,
        )
        params: dict[str, Any] = {
            "after": after,
            "limit": limit,
            "upto": upto,
            "subject": subject,
            "run": run,
            **viewer(principal),
        }
        return list(await self.session.execute(query, params))

    async def latest(
        self, principal: Principal, upto: int, limit: int, types: TypeFilter
    ) -> list[Row[Any]]:
        """The newest sequenced events at or before `upto` that `principal` may see, newest
        first (a notifications list)."""
        query = select(*_EVENTS.c).where(
            Event.position.is_not(None),
            Event.position <= upto,
            type_clause(types),
            visible_event_clause(principal),
        )
        query = query.order_by(Event.position.desc()).limit(limit)
        return list(await self.session.execute(query, viewer(principal)))

    async def run_visible(self, principal: Principal, run_id: str) -> bool:
        query = (
            select(WorkflowRun.id).where(WorkflowRun.id == run_id)
            if principal.is_admin
            else VISIBLE_RUNS.where(WorkflowRun.id == run_id)
        )
        return await self.session.scalar(query.limit(1), viewer(principal)) is not None

    async def visible_ids(self, principal: Principal, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = await self.session.scalars(
            select(Event.id).where(Event.id.in_(ids), visible_event_clause(principal)),
            viewer(principal),
        )
        return set(rows)

    async def prune(self, before: datetime) -> int:
        result = await self.session.execute(
            delete(Event)
            .where(Event.recorded_at < before)
            .execution_options(synchronize_session=False)
        )
        return int(getattr(result, "rowcount", 0) or 0)

    async def cursor(self, name: str) -> int:
        found = await self.session.scalar(
            select(EventCursor.position).where(EventCursor.name == name)
        )
        if found is None:
            await self.session.execute(insert(EventCursor).values(name=name, position=0))
            return 0
        return int(found)

    async def move_cursor(self, name: str, old: int, new: int) -> bool:
        """Guarded: False when another consumer moved it first."""
        result = await self.session.execute(
            update(EventCursor)
            .where(EventCursor.name == name, EventCursor.position == old)
            .values(position=new)
            .execution_options(synchronize_session=False)
        )
        return int(getattr(result, "rowcount", 0) or 0) == 1
