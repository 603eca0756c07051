"""Shared fixtures. Every database test runs once on SQLite and once on PostgreSQL.

Each test gets its own outer transaction on a real database; the app's sessions join it through
savepoints, and it is rolled back at the end, so tests never see each other's rows.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from starlette.applications import Starlette

from calcgraph.app import create_app
from calcgraph.db.dialect import configure_sqlite
from calcgraph.db.engine import Database
from calcgraph.db.migrate import upgrade
from calcgraph.settings import Settings

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
BACKENDS = [b for b in os.environ.get("CALCGRAPH_TEST_DATABASES", "sqlite,postgresql").split(",")]


async def _reset_postgres(url: str) -> None:
    """Create the test database if missing, then start from an empty public schema."""
    base, _, name = url.rpartition("/")
    admin = create_async_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            exists = await conn.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            )
            if not exists:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
async def database_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    if backend == "sqlite":
        path: Path = tmp_path_factory.mktemp("sqlite") / "calcgraph.db"
        url = f"sqlite+aiosqlite:///{path}"
    else:
        url = POSTGRES_URL
        await _reset_postgres(url)
    migrator = Database(url)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    return url


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url)
    if database_url.startswith("sqlite"):
        configure_sqlite(engine, busy_timeout_ms=5000)
    yield engine
    await engine.dispose()


@pytest.fixture
async def database(engine: AsyncEngine, database_url: str) -> AsyncIterator[Database]:
    async with engine.connect() as conn:
        outer = await conn.begin()
        yield Database(database_url, bind=conn)
        await outer.rollback()


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def app(settings: Settings, database: Database) -> Starlette:
    return create_app(settings, database)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c
