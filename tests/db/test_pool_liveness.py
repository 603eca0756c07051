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
from calcgraph.settings import Settings

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


async def _burst(database: Database, size: int, hold: float = 0.0) -> set[int]:
    """The backends of `size` concurrent read sessions, each holding its connection `hold` s;
    with no `hold`, until all have one (`size` no more than the pool's)."""
    barrier = asyncio.Barrier(size)

    async def one() -> int:
        async with database.read_session() as session:
            pid = int(await session.scalar(text("SELECT pg_backend_pid()")) or 0)
            if hold:
                await asyncio.sleep(hold)
            else:
                await barrier.wait()
            return pid

    return set(await asyncio.gather(*(one() for _ in range(size))))


async def test_a_burst_leaves_its_connections_in_the_pool(postgres_url: str) -> None:
    """The pool keeps what a burst of requests opened: the next burst of the same size connects
    nothing new (a connection closed on its return costs the next burst a backend, a login and
    its statements prepared again, when the server is busiest)."""
    settings = Settings(database_url=postgres_url)
    database = Database.from_settings(settings)
    size = settings.database_pool_size
    try:
        # Five times the pool's requests at once: they take turns on the pool's connections.
        first = await _burst(database, 5 * size, hold=0.05)
        assert len(first) == size
        assert await _burst(database, 5 * size, hold=0.05) == first
    finally:
        await database.dispose()


async def test_a_quiet_server_keeps_using_its_last_connection(postgres_url: str) -> None:
    """Last in, first out: after a burst, one request at a time reuses the connection returned
    last rather than cycling through every idle one (each then idle long enough to be pinged)."""
    settings = Settings(database_url=postgres_url)
    database = Database.from_settings(settings)
    try:
        await _burst(database, settings.database_pool_size)
        assert len({await _backend_pid(database) for _ in range(5)}) == 1
    finally:
        await database.dispose()


async def test_past_the_queue_a_unit_of_work_is_refused_at_once(postgres_url: str) -> None:
    """An API process admits its pool's connections plus `database_queue_limit` units of work;
    one more is refused at once with the pool's own retryable error (503 with Retry-After at
    both doors), not after waiting behind the queue. A unit that ends makes room; the workers'
    database (`queue=False`) is never refused."""
    from calcgraph.db.dialect import is_retryable
    from calcgraph.db.engine import Overloaded
    from calcgraph.rest_compat.errors import error_response

    settings = Settings(database_url=postgres_url, database_pool_size=1, database_queue_limit=1)
    database = Database.from_settings(settings)
    workers = Database.from_settings(settings, queue=False)
    release = asyncio.Event()
    entered = asyncio.Event()

    async def hold() -> None:
        async with database.read_session() as session:
            await session.execute(text("SELECT 1"))
            entered.set()
            await release.wait()

    async def waits() -> int:
        async with database.write_session() as session:
            return int((await session.execute(text("SELECT 2"))).scalar_one())

    try:
        holder = asyncio.create_task(hold())
        await entered.wait()
        waiter = asyncio.create_task(waits())  # the queue's one place
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as refused:
            async with database.read_session() as session:
                await session.execute(text("SELECT 3"))
        assert is_retryable(refused.value)
        response = error_response(refused.value)
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "1"

        release.set()
        await holder
        assert await waiter == 2
        async with database.read_session() as session:  # room again
            assert (await session.execute(text("SELECT 4"))).scalar_one() == 4

        async def brief(db: Database) -> int:
            async with db.read_session() as session:
                value = int((await session.execute(text("SELECT 5"))).scalar_one())
                await asyncio.sleep(0.01)
                return value

        assert await asyncio.gather(*(brief(workers) for _ in range(4))) == [5] * 4
    finally:
        release.set()
        await database.dispose()
        await workers.dispose()
