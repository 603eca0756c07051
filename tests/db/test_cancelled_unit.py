"""A unit of work cancelled while one of its statements is in flight leaves SQLite writable.

SQLAlchemy answers the cancellation by discarding the connection (an exit exception
invalidates it); without a rollback first, SQLite kept that connection's write transaction,
and so the database's one write lock, for as long as the cancelled statement lived on
(until a garbage collection): every other writer, the workers' heartbeat and sweeper among
them, then met "database is locked" after its busy timeout."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from calcgraph.db.engine import Database

MARK = "/* in flight */"


async def _cancel_in_flight(database: Database) -> None:
    """Cancel a write session (which wrote already) while its SELECT is being executed: the
    cancellation is queued as the statement is sent, so it reaches the session while it
    awaits the statement's answer, before the rows are fetched."""
    tasks: list[asyncio.Task[None]] = []

    def cancel(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith(MARK):
            asyncio.get_running_loop().call_soon(tasks[0].cancel)

    async def unit() -> None:
        async with database.write_session() as session:
            await session.execute(text("UPDATE counter SET n = n + 1"))
            await session.execute(text(f"{MARK} SELECT n FROM counter"))
            await asyncio.sleep(60)  # not reached: cancelled on the statement above

    event.listen(database.engine.sync_engine, "before_cursor_execute", cancel)
    try:
        tasks.append(asyncio.create_task(unit()))
        with pytest.raises(asyncio.CancelledError):
            await tasks[0]
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", cancel)


async def test_a_cancelled_unit_of_work_releases_the_write_lock(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/cancel.db"
    first = Database(url, busy_timeout_ms=200)
    other = Database(url, busy_timeout_ms=200)
    try:
        async with first.write_session() as session:
            await session.execute(text("CREATE TABLE counter (n INTEGER NOT NULL)"))
            await session.execute(text("INSERT INTO counter (n) VALUES (0)"))
        for _ in range(5):
            await _cancel_in_flight(first)
            # Another writer (a worker's own engine) gets the lock at once...
            async with other.write_session() as session:
                await session.execute(text("UPDATE counter SET n = n + 10"))
            # ...and so does the cancelled unit's own engine.
            async with first.write_session() as session:
                n = await session.scalar(text("SELECT n FROM counter"))
        # The cancelled units' increments were rolled back; the others' were committed.
        assert n == 50
    finally:
        await first.dispose()
        await other.dispose()
