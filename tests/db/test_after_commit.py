"""What a committed unit of work owes its rows is paid whatever happens after the commit.

The hooks are told in order (the run changes, the event signal, the outbox last): a hook
ahead of the outbox that failed, or a caller cancelled while such a hook awaited (a client
gone, a timeout), left the outbox untold, and the jobs the unit wrote `queued` never had
their messages sent (a run stalled until the sweeper re-sent them, or for ever where the
sweeper is off)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.enqueue import Message, enqueue
from calcgraph.domain.runs import changes
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.run_changes import LocalRunChanges, attach_run_changes


class Announcer:
    """A hook ahead of the outbox that wakes readers (as the event signal does): it fails,
    or waits on `gate` until released."""

    wakes_readers = True

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.told = 0

    def begin(self) -> Any:
        return None

    def opened(self, session: AsyncSession, state: Any) -> None:
        pass

    async def before_commit(self, session: AsyncSession, state: Any) -> None:
        pass

    async def committed(self, state: Any) -> None:
        self.told += 1
        if self.fail:
            raise RuntimeError("the announcement failed")
        self.waiting.set()
        await self.gate.wait()

    def end(self, state: Any) -> None:
        pass


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/after.db")
    async with database.write_session() as session:
        await session.execute(text("CREATE TABLE job (id TEXT PRIMARY KEY)"))
    try:
        yield database
    finally:
        await database.dispose()


def _hooks(database: Database, announcer: Announcer) -> tuple[list[str], LocalRunChanges]:
    sent: list[str] = []

    def send_many(messages: Sequence[Message]) -> int:
        sent.extend(str(m.kwargs["job_id"]) for m in messages)
        return 0

    attach(database, Outbox(lambda m: None, send_many))
    database.unit_hooks.insert(0, announcer)
    run_changes = LocalRunChanges()
    attach_run_changes(database, run_changes)
    assert database.unit_hooks[-1].__class__ is Outbox  # told last, after the announcer
    return sent, run_changes


async def _unit(database: Database, job_id: str) -> None:
    async with database.write_session() as session:
        await session.execute(text("INSERT INTO job (id) VALUES (:id)"), {"id": job_id})
        enqueue("jobs.run", job_id=job_id)
        changes.changed("run-1")


async def _jobs(database: Database) -> list[str]:
    async with database.read_session() as session:
        return list((await session.scalars(text("SELECT id FROM job ORDER BY id"))).all())


async def test_a_failing_hook_neither_loses_the_messages_nor_fails_the_caller(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    announcer = Announcer(fail=True)
    sent, run_changes = _hooks(database, announcer)
    await _unit(database, "a")  # the caller's answer is true: its unit committed
    assert await _jobs(database) == ["a"]
    assert announcer.told == 1
    assert sent == ["a"]
    assert await run_changes.token("run-1") is not None
    assert "Announcer failed after a unit of work committed" in caplog.text
    await _unit(database, "b")  # and the next unit is told as the first was
    assert sent == ["a", "b"]


async def test_a_caller_cancelled_after_the_commit_still_sends_its_messages(
    database: Database,
) -> None:
    """The cancellation cuts short the hook it reaches; the outbox after it is still told,
    then the caller sees its cancellation."""
    announcer = Announcer()
    sent, _ = _hooks(database, announcer)
    unit = asyncio.create_task(_unit(database, "a"))
    await asyncio.wait_for(announcer.waiting.wait(), 10)
    assert sent == []
    unit.cancel()  # while the hook ahead of the outbox awaits
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(unit, 10)
    assert sent == ["a"]
    assert await _jobs(database) == ["a"]


async def test_a_caller_cancelled_before_the_commit_sends_nothing(database: Database) -> None:
    """The rule's other half, unchanged: a unit cancelled before its commit rolls back, and
    its messages never leave."""
    announcer = Announcer()
    announcer.gate.set()
    sent, _ = _hooks(database, announcer)
    started = asyncio.Event()

    async def unit() -> None:
        async with database.write_session() as session:
            await session.execute(text("INSERT INTO job (id) VALUES ('a')"))
            enqueue("jobs.run", job_id="a")
            started.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(unit())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sent == []
    assert await _jobs(database) == []
    assert announcer.told == 0
