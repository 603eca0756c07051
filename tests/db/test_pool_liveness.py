"""PostgreSQL pooled connections: one taken again soon is used without a ping round trip; one
the server closed, or one idle in the pool too long, is checked and replaced, so the unit of
work that takes it still succeeds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from calcgraph.db import engine as engine_module
from calcgraph.db.engine import Database

pytestmark = pytest.mark.db


@pytest.fixture
def postgres_url(database_url: str) -> str:
    if not database_url.startswith("postgresql"):
        pytest.skip("the pool's liveness check is PostgreSQL's (SQLite has no server)")
    return database_url


def _counting_pings(database: Database) -> list[object]:
    dialect: Any = database.engine.sync_engine.dialect
    pings: list[object] = []
    real = dialect.do_ping

    def do_ping(dbapi_connection: object) -> bool:
        pings.append(dbapi_connection)
        return bool(real(dbapi_connection))

    dialect.do_ping = do_ping
    return pings


async def _backend_pid(database: Database) -> int:
    async with database.read_session() as session:
        return int(await session.scalar(text("SELECT pg_backend_pid()")) or 0)


async def test_a_connection_taken_again_soon_costs_no_ping(postgres_url: str) -> None:
    database = Database(postgres_url)
    try:
        pings = _counting_pings(database)
        first = await _backend_pid(database)
        for _ in range(5):
            assert await _backend_pid(database) == first
        assert pings == []
    finally:
        await database.dispose()


async def test_a_connection_the_server_closed_is_replaced_unseen(postgres_url: str) -> None:
    database = Database(postgres_url)
    other = Database(postgres_url, pre_ping=False)
    try:
        first = await _backend_pid(database)
        async with other.read_session() as session:
            await session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        await asyncio.sleep(0.5)  # the loop reads the closed socket meanwhile
        second = await _backend_pid(database)
        assert second != first
    finally:
        await other.dispose()
        await database.dispose()


async def test_a_connection_idle_longer_than_the_limit_is_pinged(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PING_IDLE_S", 0.0)
    database = Database(postgres_url)
    try:
        pings = _counting_pings(database)
        first = await _backend_pid(database)
        assert await _backend_pid(database) == first
        assert len(pings) == 1
    finally:
        await database.dispose()
