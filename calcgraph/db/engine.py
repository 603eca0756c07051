"""The database handle: one engine, write and read sessions with the unit-of-work rule.

Services never commit: the door that opened a write session commits it (one transaction per
REST request, per GraphQL mutation field, per actor message) or rolls it back on error.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from calcgraph.db.dialect import SQLITE_BEGIN_MODE, configure_sqlite, private_sqlite_file

if TYPE_CHECKING:
    from calcgraph.settings import Settings


class UnitHook(Protocol):
    """Joins every write session (the outbox of `calcgraph.workers.flush`): `begin` before the
    unit of work, `committed` only after its commit succeeded, `end` always, last."""

    def begin(self) -> Any: ...

    async def committed(self, state: Any) -> None: ...

    def end(self, state: Any) -> None: ...


class Database:
    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 5000,
        bind: AsyncConnection | None = None,
        pre_ping: bool = True,
        pool_size: int = 10,
        max_overflow: int = 20,
        pool_timeout: float = 30.0,
    ) -> None:
        self.url = url
        self.dialect_name = "sqlite" if url.startswith("sqlite") else "postgresql"
        self.unit_hooks: list[UnitHook] = []
        self._pinged_at = -math.inf
        self._ping_lock = asyncio.Lock()
        if bind is not None:
            # Tests: every session joins the connection's outer transaction through a
            # savepoint, so the test can roll everything back at its end.
            self.engine: AsyncEngine = bind.engine
            self._factory = async_sessionmaker(
                bind=bind, expire_on_commit=False, join_transaction_mode="create_savepoint"
            )
            return
        kwargs: dict[str, Any] = {}
        if self.dialect_name == "postgresql":
            # pre_ping costs a round trip per unit of work; callers that retry a failed unit
            # anyway (the workers) switch it off and rely on SQLAlchemy invalidating the pool
            # when a statement meets a dropped connection.
            kwargs.update(
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=pool_timeout,
                pool_pre_ping=pre_ping,
            )
        if self.dialect_name == "sqlite":
            private_sqlite_file(url)
        self.engine = create_async_engine(url, **kwargs)
        if self.dialect_name == "sqlite":
            configure_sqlite(self.engine, busy_timeout_ms)
        self._factory = async_sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_settings(cls, settings: Settings, *, pre_ping: bool = True) -> Database:
        """The database of `settings`, with its pool's size and timeout (PostgreSQL)."""
        return cls(
            settings.database_url,
            busy_timeout_ms=settings.sqlite_busy_timeout_ms,
            pre_ping=pre_ping,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
            pool_timeout=settings.database_pool_timeout_seconds,
        )

    @asynccontextmanager
    async def write_session(self) -> AsyncIterator[AsyncSession]:
        """One unit of work: committed when the block ends, rolled back if it raises."""
        token = SQLITE_BEGIN_MODE.set("IMMEDIATE")
        states = [(hook, hook.begin()) for hook in self.unit_hooks]
        try:
            async with self._factory() as session:
                try:
                    yield session
                    await session.commit()
                except BaseException:
                    await session.rollback()
                    raise
            # Only reached after a successful commit: jobs go out after the rows they name.
            for hook, state in states:
                await hook.committed(state)
        finally:
            for hook, state in reversed(states):
                hook.end(state)
            SQLITE_BEGIN_MODE.reset(token)

    @asynccontextmanager
    async def read_session(self) -> AsyncIterator[AsyncSession]:
        """A short-lived session for queries; never shared between concurrent resolvers."""
        # Closing (not rolling back) ends the transaction without expiring what was loaded,
        # so results stay readable after the block.
        async with self._factory() as session:
            yield session

    async def ping(self, max_age: float = 0.0) -> None:
        """Reach the database, or raise. With `max_age`, a success at most that many seconds
        old answers without a round trip, and concurrent callers share one ping: a readiness
        probe polled often then costs the database (and the pool) nothing most of the time."""
        if max_age > 0 and time.monotonic() - self._pinged_at <= max_age:
            return
        async with self._ping_lock:
            if max_age > 0 and time.monotonic() - self._pinged_at <= max_age:
                return
            async with self.read_session() as session:
                await session.execute(text("SELECT 1"))
            self._pinged_at = time.monotonic()

    async def dispose(self) -> None:
        await self.engine.dispose()
