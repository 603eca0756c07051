"""The database handle: one engine, write and read sessions with the unit-of-work rule.

Services never commit: the door that opened a write session commits it (one transaction per
REST request, per GraphQL mutation field, per actor message) or rolls it back on error.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

from sqlalchemy import event, text
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from calcgraph.db.charged import Charged, charge_decoding
from calcgraph.db.defaults import (
    MAX_OVERFLOW,
    POOL_SIZE,
    POOL_TIMEOUT_S,
    SQLITE_BUSY_TIMEOUT_MS,
)
from calcgraph.db.dialect import SQLITE_BEGIN_MODE, configure_sqlite, private_sqlite_file

log = logging.getLogger("calcgraph.db")


class DatabaseSettings(Protocol):
    """What a database takes from the settings (`calcgraph.settings.Settings` has it)."""

    @property
    def database_url(self) -> str: ...
    @property
    def sqlite_busy_timeout_ms(self) -> int: ...
    @property
    def database_pool_size(self) -> int: ...
    @property
    def database_max_overflow(self) -> int: ...
    @property
    def database_pool_timeout_seconds(self) -> float: ...
    @property
    def database_queue_limit(self) -> int: ...


# A pooled connection back in the pool for less than this is taken again without a round trip
# (unless its socket is already closed); one idle longer is pinged first.
PING_IDLE_S = 10.0
_CHECKED_IN_AT = "calcgraph.checked_in_at"
_UNIT_WEIGHT = 0.05
_RETRY_MAX_S = 30


class Overloaded(PoolTimeout):
    """More units of work wait for a pooled connection than the queue admits: answered at once
    as the pool's own timeout is (503 Unavailable, `is_retryable`), instead of after a wait
    that grows with the queue. `retry_after`: seconds, twice what a unit of work lately took
    from admission to its end (1 to 30): the queue has drained by then, and clients told to
    come back sooner than that only make refusals the server's work."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnitHook(Protocol):
    """Joins every write session (the outbox of `calcgraph.workers.flush`): `begin` before the
    unit of work, `opened` with its session, `before_commit` in its transaction once its work
    is done (what it runs is committed with it, or rolled back with it), `committed` only
    after its commit succeeded, `end` always, last."""

    def begin(self) -> Any: ...

    def opened(self, session: AsyncSession, state: Any) -> None: ...

    async def before_commit(self, session: AsyncSession, state: Any) -> None: ...

    async def committed(self, state: Any) -> None: ...

    def end(self, state: Any) -> None: ...


class CollectingHook:
    """A `UnitHook` that gathers what its unit of work marks, in a context of the unit's own
    (`collect`): `begin` enters it, `end` leaves it, and the state between is the context
    and what it gathers. It does nothing as the session opens or before the commit unless it
    says otherwise; `committed` acts on what was gathered."""

    def collect(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def begin(self) -> Any:
        manager = self.collect()
        return manager, manager.__enter__()

    def opened(self, session: AsyncSession, state: Any) -> None:
        pass

    async def before_commit(self, session: AsyncSession, state: Any) -> None:
        pass

    async def committed(self, state: Any) -> None:
        raise NotImplementedError

    def end(self, state: Any) -> None:
        manager, _ = state
        manager.__exit__(None, None, None)


async def _tell_committed(states: list[tuple[UnitHook, Any]]) -> None:
    """Tell every hook that the unit committed, in order, each whatever happened to the one
    before: the rows are committed, and a hook left untold loses what it owes them (the
    outbox, told last: its messages, and so a job row `queued` whose message never leaves,
    waiting for the sweeper). A hook that fails is logged, and the unit's caller gets its
    answer, which is true. A cancellation (a client gone, a timeout) cuts short the hook it
    reaches, and is raised once the hooks after it were told too."""
    cancelled: asyncio.CancelledError | None = None
    for hook, state in states:
        try:
            await hook.committed(state)
        except asyncio.CancelledError as exc:
            cancelled = exc
        except Exception:
            log.exception("%s failed after a unit of work committed", type(hook).__name__)
    if cancelled is not None:
        raise cancelled


class Database:
    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
        bind: AsyncConnection | None = None,
        pre_ping: bool = True,
        pool_size: int = POOL_SIZE,
        max_overflow: int = MAX_OVERFLOW,
        pool_timeout: float = POOL_TIMEOUT_S,
        queue_limit: int | None = None,
        charged: Callable[[], Charged | None] | None = None,
    ) -> None:
        """`charged`: what pays, in the context that checks out a pooled connection, for the
        JSON values decoded on it until it is checked in (PostgreSQL; `db.charged`)."""
        self.url = url
        # Admission (PostgreSQL, `queue_limit` given): units of work in flight, each holding a
        # pooled connection or waiting for one, at most the pool's connections plus the queue.
        self._in_flight = 0
        self._admits: int | None = None
        self._unit_s = 0.0  # moving mean of a unit's time from admission to its end
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
            self._autocommit_factory = self._snapshot_factory = self._factory
            return
        kwargs: dict[str, Any] = {}
        if self.dialect_name == "postgresql":
            # The pool keeps what a burst opened (no overflow by default): a connection closed
            # on its return costs the next burst a new backend, its login and every statement
            # prepared again, server CPU when the server is busiest. Last in, first out: a quiet
            # server keeps using its few warm connections; the rest idle, pinged when taken.
            kwargs.update(
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=pool_timeout,
                pool_use_lifo=True,
            )
            if queue_limit is not None:
                self._admits = pool_size + max_overflow + queue_limit
        if self.dialect_name == "sqlite":
            private_sqlite_file(url)
        self.engine = create_async_engine(url, **kwargs)
        self._statements_answer()
        if self.dialect_name == "sqlite":
            configure_sqlite(self.engine, busy_timeout_ms)
        elif pre_ping:
            # Callers that retry a failed unit anyway (the workers) switch it off and rely on
            # SQLAlchemy invalidating the pool when a statement meets a dropped connection.
            _ping_when_idle(self.engine, PING_IDLE_S)
        if self.dialect_name == "postgresql" and charged is not None:
            charge_decoding(self.engine, charged)
        self._factory = async_sessionmaker(self.engine, expire_on_commit=False)
        self._autocommit_factory = self._factory
        self._snapshot_factory = self._factory
        if self.dialect_name == "postgresql":
            self._autocommit_factory = async_sessionmaker(
                self.engine.execution_options(isolation_level="AUTOCOMMIT"),
                expire_on_commit=False,
            )
            self._snapshot_factory = async_sessionmaker(
                self.engine.execution_options(
                    isolation_level="REPEATABLE READ", postgresql_readonly=True
                ),
                expire_on_commit=False,
            )

    @classmethod
    def from_settings(
        cls,
        settings: DatabaseSettings,
        *,
        pre_ping: bool = True,
        queue: bool = True,
        charged: Callable[[], Charged | None] | None = None,
    ) -> Database:
        """The database of `settings`, with its pool's size and timeout (PostgreSQL), and its
        queue's limit unless `queue` is false (the workers, whose units wait)."""
        return cls(
            settings.database_url,
            charged=charged,
            busy_timeout_ms=settings.sqlite_busy_timeout_ms,
            pre_ping=pre_ping,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
            pool_timeout=settings.database_pool_timeout_seconds,
            queue_limit=settings.database_queue_limit if queue else None,
        )

    @asynccontextmanager
    async def _admitted(self) -> AsyncIterator[None]:
        """A unit of work's place in the pool or its queue, or Overloaded when both are full."""
        if self._admits is None:
            yield
            return
        if self._in_flight >= self._admits:
            raise Overloaded(
                f"{self._in_flight} units of work hold or wait for the pool's connections",
                min(_RETRY_MAX_S, max(1, math.ceil(2 * self._unit_s))),
            )
        self._in_flight += 1
        started = time.monotonic()
        try:
            yield
        finally:
            self._in_flight -= 1
            self._unit_s += (time.monotonic() - started - self._unit_s) * _UNIT_WEIGHT

    @asynccontextmanager
    async def write_session(self) -> AsyncIterator[AsyncSession]:
        """One unit of work: committed when the block ends, rolled back if it raises."""
        async with self._admitted(), self._write_session() as session:
            yield session

    @asynccontextmanager
    async def _write_session(self) -> AsyncIterator[AsyncSession]:
        token = SQLITE_BEGIN_MODE.set("IMMEDIATE")
        states = [(hook, hook.begin()) for hook in self.unit_hooks]
        try:
            async with self._factory() as session:
                for hook, state in states:
                    hook.opened(session, state)
                try:
                    yield session
                    for hook, state in states:
                        await hook.before_commit(session, state)
                    await session.commit()
                except BaseException:
                    await session.rollback()
                    raise
            # Only reached after a successful commit: jobs go out after the rows they name.
            await _tell_committed(states)
        finally:
            for hook, state in reversed(states):
                hook.end(state)
            SQLITE_BEGIN_MODE.reset(token)

    @asynccontextmanager
    async def read_session(
        self, *, one_transaction: bool = False, snapshot: bool = False
    ) -> AsyncIterator[AsyncSession]:
        """A short-lived session for queries; never shared between concurrent resolvers.

        On PostgreSQL each statement is its own transaction (autocommit), which saves a BEGIN
        and a ROLLBACK round trip per session: under READ COMMITTED a transaction's statements
        see a snapshot each anyway. `one_transaction`: the reads share one (`SET LOCAL`).
        `snapshot`: every read sees the same committed state (REPEATABLE READ, read only), for
        a use case whose answer joins several reads (`one_snapshot`). SQLite's reads keep their
        transaction, one snapshot already; tests' savepoint sessions too."""
        # Closing (not rolling back) ends the transaction without expiring what was loaded,
        # so results stay readable after the block.
        if snapshot:
            factory = self._snapshot_factory
        else:
            factory = self._factory if one_transaction else self._autocommit_factory
        async with self._admitted(), factory() as session:
            yield session

    def _statements_answer(self) -> None:
        """Every statement the database answers counts as a ping: a busy server's /health then
        never waits for a pooled connection. Its own ping took one from the pool like any unit
        of work, outside the admission queue but behind every unit already waiting for the
        pool, so the soak of issue 27 saw /health wait seconds whenever the pool was busy
        (p99 3.4 s with honest users alone), though the database answered all along."""

        @event.listens_for(self.engine.sync_engine, "after_cursor_execute")
        def _answered(*_: Any) -> None:
            self._pinged_at = time.monotonic()

    async def ping(self, max_age: float = 0.0) -> None:
        """Reach the database, or raise. With `max_age`, a success at most that many seconds
        old answers without a round trip (any statement the database answered counts), and
        concurrent callers share one ping: a readiness probe polled often then costs the
        database (and the pool) nothing most of the time."""
        if max_age > 0 and time.monotonic() - self._pinged_at <= max_age:
            return
        async with self._ping_lock:
            if max_age > 0 and time.monotonic() - self._pinged_at <= max_age:
                return
            # Outside the admission queue: a readiness probe of a busy server still answers.
            async with self._autocommit_factory() as session:
                await session.execute(text("SELECT 1"))
            self._pinged_at = time.monotonic()

    async def dispose(self) -> None:
        await self.engine.dispose()


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """SQLAlchemy's `pool_pre_ping` for what it protects against, without its price on a busy
    pool. pre_ping costs three round trips per unit of work on asyncpg (BEGIN, `;`, ROLLBACK):
    a quarter of an idle tick's CPU. A connection closed by the server (a restart, a terminated
    backend) is seen without a round trip, its socket being closed; one idle in the pool longer
    than `idle_s` (where a firewall or an idle timeout may have dropped it silently) is pinged
    as before. A failed check invalidates the pool and checks out a fresh connection, as
    pre_ping does."""
    sync_engine = engine.sync_engine
    dialect = sync_engine.dialect

    @event.listens_for(sync_engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        if record is not None and record.dbapi_connection is not None:
            record.info[_CHECKED_IN_AT] = time.monotonic()

    @event.listens_for(sync_engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        checked_in_at = record.info.get(_CHECKED_IN_AT)
        if checked_in_at is None:  # a fresh connection, as pre_ping skips it
            return
        driver = record.driver_connection
        if driver is not None and driver.is_closed():
            raise InvalidatePoolError("the pooled connection was closed by the server")
        if time.monotonic() - checked_in_at <= idle_s:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_connection, None):
                raise InvalidatePoolError("the pooled connection does not answer") from exc
            raise


U = TypeVar("U")


def one_snapshot(use_case: U) -> U:
    """Marks a read use case whose answer joins several reads that must agree (a deployment's
    state beside its current version and history): the doors give it `read_session(snapshot=
    True)`. Without it, on PostgreSQL a change committed between two of its reads showed half
    of itself (a canary already promoted in the history, the old version still current)."""
    use_case.one_snapshot = True  # type: ignore[attr-defined]
    return use_case


def wants_one_snapshot(use_case: object) -> bool:
    return bool(getattr(use_case, "one_snapshot", False))
