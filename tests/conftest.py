"""Shared fixtures. Every database test runs once on SQLite and once on PostgreSQL.

Each test gets its own outer transaction on a real database; the app's sessions join it through
savepoints, and it is rolled back at the end, so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine
from starlette.applications import Starlette

from calcgraph.app import create_app
from calcgraph.db.dialect import configure_sqlite
from calcgraph.db.engine import Database
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n N` (pytest-xdist): each worker process its own databases (test_gw0, ...), since
    # each empties and migrates its own; Redis keys already carry a fresh prefix per test.
    POSTGRES_URL = f"{POSTGRES_URL}_{os.environ['PYTEST_XDIST_WORKER']}"
BACKENDS = [b for b in os.environ.get("CALCGRAPH_TEST_DATABASES", "sqlite,postgresql").split(",")]
# Suites fire hundreds of requests as one user: a limit no test reaches, so the limiter still
# runs on every request (tests/ops sets its own small limits). Servers the tests start inherit it.
os.environ.setdefault("CALCGRAPH_RATE_LIMIT_PER_MINUTE", "1000000")
os.environ.setdefault("CALCGRAPH_RATE_LIMIT_BURST", "1000000")


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
        yield TurnTakingDatabase(database_url, bind=conn)
        await outer.rollback()


class TurnTakingDatabase(Database):
    """The sessions of one test share one connection, which runs one statement at a time and
    one savepoint stack; GraphQL resolves fields (and DataLoader batches) concurrently, each
    with its own session. Here they take turns; a task that already holds the turn may nest.
    In production each session has its own pooled connection and nothing waits."""

    def __init__(self, url: str, *, bind: AsyncConnection) -> None:
        super().__init__(url, bind=bind)
        self._turn = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None
        self._loop = asyncio.get_running_loop()

    @contextlib.asynccontextmanager
    async def _my_turn(self) -> AsyncIterator[None]:
        task = asyncio.current_task()
        # Nested in the holder's own task, or on another event loop (a worker thread): no turn.
        if task is None or self._holder is task or task.get_loop() is not self._loop:
            yield
            return
        async with self._turn:
            self._holder = task
            try:
                yield
            finally:
                self._holder = None

    @contextlib.asynccontextmanager
    async def write_session(self) -> AsyncIterator[AsyncSession]:
        async with self._my_turn(), super().write_session() as session:
            yield session

    @contextlib.asynccontextmanager
    async def read_session(
        self, *, one_transaction: bool = False, snapshot: bool = False
    ) -> AsyncIterator[AsyncSession]:
        async with (
            self._my_turn(),
            super().read_session(one_transaction=one_transaction, snapshot=snapshot) as session,
        ):
            yield session


@pytest.fixture(scope="session")
def identity_provider() -> Iterator[LocalIdentityProvider]:
    """A real OpenID provider on loopback (discovery + JWKS) whose keys the tests hold."""
    provider = LocalIdentityProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def settings(database_url: str, identity_provider: LocalIdentityProvider) -> Settings:
    return Settings(  # type: ignore[call-arg]
        database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None
    )


@pytest.fixture
def bearer(identity_provider: LocalIdentityProvider) -> Callable[..., dict[str, str]]:
    """`bearer("alice")` or `bearer("root", roles=["admin", "user"])`: Authorization headers
    with a valid access token for that user (provisioned on its first request)."""
    return identity_provider.headers


@pytest.fixture
def app(settings: Settings, database: Database) -> Starlette:
    return create_app(settings, database)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c
