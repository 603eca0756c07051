"""A waiting long-poll answers as soon as a matching event is recorded, woken by the signal of
the unit that recorded it, in every deployment shape (contract section 9, Pull): one process
here; the worker process through Redis in `test_run_filter.py`
(`test_a_run_poll_is_woken_across_processes`); several `serve --workers` processes in
`test_serve_processes.py`. Each waits with the fallback re-check off, so a poll that answers
was woken by the event's own signal. And a unit's events are committed already numbered: no
reader ever finds them committed but not yet in the log (the numbering transaction that
followed each such commit was most of the delay from a job's end to a poll's answer)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.engine import Database
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.feed.service import EventFeed
from calcgraph.domain.events.models import Event
from calcgraph.domain.events.service import event_row, record_rows
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.notify import LocalNotifier
from tests.events.helpers import published
from tests.events.redis_shape import WAIT, waiting_poll
from tests.execution.conftest import Platform

pytestmark = pytest.mark.db


class _Probe:
    """A hook ahead of the event signal: once the unit has committed, what another reader
    finds of its events (their positions)."""

    def __init__(self, database: Database, ids: list[str]) -> None:
        self.database = database
        self.ids = ids
        self.found: list[int | None] | None = None

    def begin(self) -> Any:
        return None

    def opened(self, session: AsyncSession, state: Any) -> None:
        pass

    async def before_commit(self, session: AsyncSession, state: Any) -> None:
        pass

    async def committed(self, state: Any) -> None:
        async with self.database.read_session() as session:
            rows = await session.execute(
                select(Event.position).where(Event.id.in_(self.ids)).order_by(Event.position)
            )
            if self.found is None:  # the unit's own commit, not a later one's
                self.found = [position for (position,) in rows]

    def end(self, state: Any) -> None:
        pass


async def test_a_units_events_are_committed_numbered(database: Database) -> None:
    hooks = list(database.unit_hooks)
    rows = [event_row(USER_LOGIN, str(uuid.uuid4()), {"username": "x"}) for _ in range(3)]
    probe = _Probe(database, [str(r["id"]) for r in rows])
    database.unit_hooks.append(probe)
    attach_signal(database, LocalNotifier())  # last, after the probe
    try:
        async with database.write_session() as session:
            await record_rows(session, rows)
        assert probe.found is not None
        assert len(probe.found) == 3
        assert None not in probe.found, probe.found
        first = probe.found[0]
        assert first is not None
        assert probe.found == [first, first + 1, first + 2]
    finally:
        database.unit_hooks[:] = hooks


async def test_a_rolled_back_unit_numbers_nothing(database: Database) -> None:
    """Its positions go with it: the next unit's events follow the last committed ones."""
    hooks = list(database.unit_hooks)
    attach_signal(database, LocalNotifier())
    try:

        async def unit(fail: bool) -> str:
            row = event_row(USER_LOGIN, str(uuid.uuid4()), {"username": "x"})
            async with database.write_session() as session:
                await record_rows(session, [row])
                if fail:
                    raise RuntimeError("the unit fails after recording")
            return str(row["id"])

        before = await unit(False)
        with pytest.raises(RuntimeError):
            await unit(True)
        after = await unit(False)
        async with database.read_session() as session:
            positions = dict(
                (
                    await session.execute(
                        select(Event.id, Event.position).where(Event.id.in_([before, after]))
                    )
                ).all()
            )
        first = positions[before]
        assert first is not None
        assert positions[after] == first + 1
    finally:
        database.unit_hooks[:] = hooks


async def test_one_process_a_waiting_poll_is_woken_by_the_jobs_event(
    platform: Platform,
) -> None:
    """One process (the embedded workers): the job's unit of work signals in-process."""
    feed = platform.app.state.services.events
    assert isinstance(feed, EventFeed)
    feed.recheck = 10 * WAIT  # only the signal can wake the poll
    await platform.user("alice")
    headers = platform.headers("alice")
    report = await published(platform)
    poll = await waiting_poll(platform, headers, type="calcgraph.job.succeeded")
    answer = await platform.execute(
        f"/packages/{report['package_id']}/functions/run/execute", {"x": 4.0}, wait=20
    )
    assert answer.status_code == 200, answer.text
    woke = await poll.answer(time.monotonic())
    assert [e["subject"] for e in woke] == [answer.json()["job_id"]]
