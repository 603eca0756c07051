"""/health reaches the database at most once a second: a probe polled often costs the
database nothing most of the time, and a database that stops answering still shows. Any
statement the database answered counts as a ping, so a busy pool never holds the probe."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from calcgraph.db.engine import Database

pytestmark = pytest.mark.db


def _counting(database: Database) -> list[str]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    return seen


async def test_pings_within_max_age_share_one_round_trip(database_url: str) -> None:
    database = Database(database_url)
    try:
        seen = _counting(database)
        for _ in range(20):
            await database.ping(max_age=60.0)
        assert seen.count("SELECT 1") == 1
        await database.ping()  # no max_age: always a round trip
        assert seen.count("SELECT 1") == 2
    finally:
        await database.dispose()


async def test_a_database_that_does_not_answer_fails_every_ping(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'nowhere.db'}")
    try:
        for _ in range(2):  # a failure is never remembered as a success
            with pytest.raises(OperationalError):
                await database.ping(max_age=60.0)
    finally:
        await database.dispose()


async def test_health_answers_from_a_recent_ping(client: Any, database: Database) -> None:
    seen = _counting(database)
    answers = [await client.get("/health") for _ in range(10)]
    assert {a.status_code for a in answers} == {200}
    assert seen.count("SELECT 1") <= 1


async def test_a_statement_the_database_answered_counts_as_a_ping(database_url: str) -> None:
    database = Database(database_url)
    try:
        seen = _counting(database)
        async with database.read_session() as session:
            await session.execute(text("SELECT 2"))
        await database.ping(max_age=60.0)
        assert "SELECT 2" in seen
        assert "SELECT 1" not in seen
    finally:
        await database.dispose()


async def test_a_busy_pool_does_not_hold_the_probe(database_url: str) -> None:
    """Issue 27: every pooled connection held by units of work (here the one of a pool of one)
    while the database answers them: the probe answers without waiting for a connection."""
    database = Database(database_url, pool_size=1, max_overflow=0, pool_timeout=60.0)
    holding, release = asyncio.Event(), asyncio.Event()

    async def unit_of_work() -> None:
        async with database.read_session() as session:
            await session.execute(text("SELECT 3"))
            holding.set()
            await release.wait()

    try:
        holder = asyncio.create_task(unit_of_work())
        await holding.wait()
        probe = asyncio.create_task(database.ping(max_age=60.0))
        done, _ = await asyncio.wait({probe}, timeout=30)  # a guard, not a measurement
        assert probe in done
        assert not holder.done()  # answered while the pool's connection was still held
        probe.result()
        release.set()
        await holder
    finally:
        release.set()
        await database.dispose()
