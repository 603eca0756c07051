"""Everything that differs between SQLite and PostgreSQL lives here, and only here."""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

BeginMode = Literal["DEFERRED", "IMMEDIATE"]

# SQLite takes its write lock at the first write of a DEFERRED transaction, which can fail with
# SQLITE_BUSY in the middle of a unit of work; write sessions start IMMEDIATE instead, so they
# queue for the lock up front (busy_timeout) and never deadlock halfway through.
SQLITE_BEGIN_MODE: ContextVar[BeginMode] = ContextVar("SQLITE_BEGIN_MODE", default="DEFERRED")


def private_sqlite_file(url: str) -> None:
    """Create the SQLite file 0600 (and bring an older 0644 one and its -wal/-shm to 0600):
    it holds every user's inputs and outputs. SQLite gives a new -wal/-shm the file's mode."""
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    # A folder that does not exist (or cannot be written) is SQLite's to report, on connect.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for companion in (path, Path(f"{name}-wal"), Path(f"{name}-shm"), Path(f"{name}-journal")):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if companion.stat().st_uid == os.getuid():
                companion.chmod(0o600)


def configure_sqlite(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    """WAL, foreign keys, busy timeout on connect; our own BEGIN so its mode is ours to pick."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(f"BEGIN {SQLITE_BEGIN_MODE.get()}")


_PG_RETRYABLE_SQLSTATES = {"40001", "40P01", "55P03"}


def is_retryable(exc: BaseException) -> bool:
    """A database error that a client may simply retry: SQLite busy, PostgreSQL contention."""
    if isinstance(exc, OperationalError):
        text = str(exc.orig).lower()
        if "database is locked" in text or "database is busy" in text:
            return True
    if isinstance(exc, DBAPIError):
        sqlstate = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        return sqlstate in _PG_RETRYABLE_SQLSTATES
    return False


def insert_ignoring_duplicates(dialect_name: str, table: Any) -> Any:
    """`INSERT ... ON CONFLICT DO NOTHING` on the table's primary key: content-addressed rows
    that concurrent units of work may both write."""
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing()


def locked(dialect_name: str, query: Any, of: Any = None) -> Any:
    """A SELECT that locks its rows (of the table `of`, when it joins others) until the end of
    the transaction, for read-modify-write units (the tick): FOR UPDATE on PostgreSQL. SQLite
    write sessions already hold the database's write lock from their first statement
    (BEGIN IMMEDIATE), which serialises them."""
    if dialect_name == "postgresql":
        return query.with_for_update(of=of)
    return query
