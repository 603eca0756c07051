"""/health reaches the database at most once a second: a probe polled often costs the
database nothing most of the time, and a database that stops answering still shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
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
