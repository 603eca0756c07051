"""Everything that differs between SQLite and PostgreSQL lives here, and only here."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    ARRAY,
    JSON,
    BigInteger,
    Computed,
    Select,
    String,
    Text,
    bindparam,
    case,
    cast,
    event,
    func,
    insert,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import MappedColumn, mapped_column
from sqlalchemy.sql.expression import ColumnClause
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.util import ClauseAdapter

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

    @event.listens_for(engine.sync_engine.pool, "invalidate")
    def _on_invalidate(dbapi_connection: Any, _record: Any, _exception: Any) -> None:
        # A unit of work cancelled while a statement was in flight (a subscriber leaving, a
        # closed WebSocket, shutdown) gets its connection discarded, not rolled back. SQLite
        # does not close a connection whose statement is still open: it keeps it, and its
        # transaction with the database's one write lock, until the statement is garbage,
        # so every other writer met "database is locked". Roll back first (SQLite aborts the
        # open statement): the lock goes with the transaction, whatever lives on.
        with contextlib.suppress(Exception):  # no event loop to roll back on (a GC'd one)
            dbapi_connection.rollback()


# serialization failure, deadlock, lock not available, too many connections
_PG_RETRYABLE_SQLSTATES = {"40001", "40P01", "55P03", "53300"}


def is_retryable(exc: BaseException) -> bool:
    """A database error that a client may simply retry: SQLite busy, PostgreSQL contention,
    a server out of connections, or no free connection in the pool within its timeout (a
    server under more load than its pool: a 503 to retry, not a 500)."""
    if isinstance(exc, SQLAlchemyTimeoutError):
        return True
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


def locked(dialect_name: str, query: Any, of: Any = None, *, skip_locked: bool = False) -> Any:
    """A SELECT that locks its rows (of the table `of`, when it joins others) until the end of
    the transaction, for read-modify-write units (the tick): FOR UPDATE on PostgreSQL. SQLite
    write sessions already hold the database's write lock from their first statement
    (BEGIN IMMEDIATE), which serialises them.

    `skip_locked`: a row another transaction holds is left out rather than waited for (FOR
    UPDATE SKIP LOCKED), so that a unit that would only queue behind another one holding a
    pooled connection can do something else."""
    if dialect_name == "postgresql":
        return query.with_for_update(of=of, skip_locked=skip_locked)
    return query


def by_keys(
    dialect_name: str,
    columns: Sequence[Any],
    key: Any,
    keys: str | Select[Any],
    *where: Any,
    join: tuple[Any, Any] | None = None,
    prefix: Sequence[Any] = (),
) -> Any:
    """SELECT `columns` (of `key`'s table, or of it joined to the table `join[0]` on the
    condition `join[1]`) of the rows whose `key` column is one of `keys` (the list bound to
    the parameter of that name, or what the one-column SELECT returns) and match `where`, each
    row read by its key whatever the statistics. `prefix`: the equality conditions on the
    columns before `key` in its index (a composite primary key), inside the probe.

    PostgreSQL: one LATERAL probe per key (`unnest` of the list, or of `ARRAY(<the SELECT>)`),
    a nested loop over the key's index by construction. A plain `IN` (or a join with the list)
    of 100 job ids let it hash the whole table on fresh tables, whose size it underestimates;
    `key = ANY(ARRAY(<the SELECT>))` let it scan the table whole by the generic plan it cached
    for asyncpg's prepared statement while the table was small (180 of 181 reads of the
    running nodes' jobs in a 10,000-node run on fresh tables, 2-19 ms each as it grew), where
    a probe costs less than a scan of the table as PostgreSQL takes it then. The probe holds
    the key's table and its key alone, and `where` and `join` apply to the row it found: with
    a caller's visibility inside it, PostgreSQL read each key through another index, on
    statistics taken when the caller had few jobs (every job of the caller, 10,000, per key).
    SQLite: `IN`, which it always reads by key."""
    table = key.table
    if dialect_name != "postgresql":
        wanted = key.in_(bindparam(keys, expanding=True) if isinstance(keys, str) else keys)
        source = table if join is None else table.join(*join)
        return select(*columns).select_from(source).where(*prefix, wanted, *where)
    listed = (
        bindparam(keys, type_=ARRAY(String))
        if isinstance(keys, str)
        else func.array(keys.scalar_subquery(), type_=ARRAY(key.type))
    )
    values = func.unnest(listed).table_valued("key").render_derived()
    probe = select(table).where(*prefix, key == values.c.key).limit(1).lateral()
    on_probe = ClauseAdapter(probe).traverse
    source = values.join(probe, true())
    if join is not None:
        source = source.join(join[0], on_probe(join[1]))
    return (
        select(*(on_probe(column) for column in columns))
        .select_from(source)
        .where(*(on_probe(condition) for condition in where))
    )


def rows_after(
    dialect_name: str, columns: Sequence[Any], column: Any, since: Any, until: Any, *where: Any
) -> Any:
    """SELECT `columns` of the rows matching `where` whose integer `column` is after `since`
    and at most `until` (a scalar SELECT of the highest value it may hold), read by an index
    on (<`where`'s columns>, `column`) whatever the statistics.

    PostgreSQL: one LATERAL probe of the index per value of `generate_series(since + 1,
    until)`, kept a nested loop by `OFFSET 0`. As a range (`column > since`), PostgreSQL
    estimated it over the whole table, and after ANALYZE read a run's 10,000 node states
    through the (run, status) index for the 200 a tick changed; as `column = ANY(ARRAY(...))`
    it kept the array as a filter on statistics taken while the table was small.
    SQLite: `column > since`."""
    if dialect_name != "postgresql":
        return select(*columns).where(*where, column > since)
    values = func.generate_series(since + 1, until).table_valued("value").render_derived()
    probe = select(*columns).where(*where, column == values.c.value).offset(0).lateral()
    return select(*probe.c).select_from(values).join(probe, true())


def without_sorts(dialect_name: str) -> Any | None:
    """PostgreSQL: the statement that makes the rest of the transaction plan without sorts
    (`SET LOCAL enable_sort = off`, ended by its commit or rollback); None elsewhere.

    For `ORDER BY <an index's columns> LIMIT n`, where the index read in order is the only
    plan that reads n rows: on fresh tables PostgreSQL takes a run of 10,000 nodes for 16 rows,
    reads them all through a bitmap scan and sorts them for the first 100 (17 ms, 50 under
    load, against 0.3). A plan that must sort still can; it is only planned last."""
    if dialect_name != "postgresql":
        return None
    return select(func.set_config("enable_sort", "off", true()))


def custom_plans(dialect_name: str) -> tuple[Any, Any] | None:
    """PostgreSQL: two statements around statements that must be planned for their own
    parameters: the first makes the transaction plan each statement afresh
    (`plan_cache_mode = force_custom_plan`, local to the transaction) and returns the mode
    it replaced; the second puts back the mode bound to `:mode`. None elsewhere.

    asyncpg prepares each statement once per connection, and after five runs PostgreSQL
    caches a generic plan for it, planned on the tables as they are then: on a fresh database
    they are tiny, every index of the run costs the same, and the UPDATE of a tick's
    submitted nodes kept reaching each node through an index by the run alone as the run grew
    (36-178 ms per 1,000 nodes instead of 7-11 ms). The mode must not outlive those
    statements: it also replans the foreign-key checks of an INSERT, once per row (1,000 job
    rows: 58-111 ms instead of 12-25)."""
    if dialect_name != "postgresql":
        return None
    mode = "plan_cache_mode"
    start = select(func.current_setting(mode), func.set_config(mode, "force_custom_plan", true()))
    end = select(func.set_config(mode, bindparam("mode", type_=String()), true()))
    return start, end


def update_from_arrays(
    table: Any, scalars: Mapping[str, str], key: str, arrays: Mapping[str, Any]
) -> Any:
    """PostgreSQL: one UPDATE of many rows of `table`: the row whose `scalars` columns equal
    the values bound to their names (column -> parameter) and whose `key` column is the i-th
    of the array bound to `a_<key>s` gets each column of `arrays` (name -> element type) from
    the i-th of the array bound to `a_<name>s` (prefixed: a bound name may not be a column's,
    and `attempt` + s is one). The caller adds `.values()` for what all rows
    share. An executemany runs one statement per row on the server (1,000 rows: 185 ms).

    Each row is found by one LATERAL probe of the primary key and updated by its `ctid` (a
    TID scan): a plain join of the table with the arrays let PostgreSQL hash every row of the
    run, or scan the table, depending on statistics. The caller holds the lock that keeps
    other writers off these rows (a concurrent update would make the row's ctid stale)."""
    rows = select(
        *(
            bindparam(parameter, type_=table.c[column].type).label(column)
            for column, parameter in scalars.items()
        ),
        func.unnest(bindparam(f"a_{key}s", type_=ARRAY(table.c[key].type))).label(key),
        *(
            func.unnest(bindparam(f"a_{name}s", type_=ARRAY(kind))).label(name)
            for name, kind in arrays.items()
        ),
    ).subquery("rows")
    probe = table.alias("probe")
    found = (
        select(ColumnClause("ctid", _selectable=probe).label("tid"))
        .select_from(probe)
        .where(*(probe.c[column] == rows.c[column] for column in (*scalars, key)))
        .limit(1)
        .lateral("found")
    )
    targets = (
        select(*(rows.c[name] for name in arrays), found.c.tid)
        .select_from(rows)
        .join(found, true())
        .subquery("targets")
    )
    return (
        update(table)
        .where(ColumnClause("ctid", _selectable=table) == targets.c.tid)
        .values({name: targets.c[name] for name in arrays})
    )


def insert_from_arrays(
    table: Any, arrays: Sequence[str], scalars: Sequence[str] = (), prefix: str = "a_"
) -> Any:
    """PostgreSQL: one INSERT of many rows of `table`: row i's column is the i-th element of
    the array bound to `prefix` and the column's name for `arrays`, the value bound to it for
    `scalars` (what every row shares: bound once). JSON columns take JSON text, cast to JSONB.
    An executemany runs one statement per row on the server, each bound and executed apart
    (1,000 job rows: ~2x the time of this one statement). The prefix keeps the names apart
    from a column's own (reserved by an INSERT or UPDATE) in a statement that holds it as a
    CTE."""

    def value(name: str, array: bool) -> Any:
        column = table.c[name]
        json = isinstance(column.type, JSON)
        kind = Text() if json else column.type
        bound: Any = bindparam(prefix + name, type_=ARRAY(kind) if array else kind)
        if array:
            bound = func.unnest(bound)
        return (cast(bound, JSONB) if json else bound).label(name)

    selected = [value(name, True) for name in arrays] + [value(name, False) for name in scalars]
    return insert(table).from_select([*arrays, *scalars], select(*selected))


class TextBytes(FunctionElement[int]):
    """The size in bytes of a JSON or text column's stored text (0 when NULL), computed by the
    database so that a listing can leave big values out without reading them; one construct,
    written for the dialect it is compiled for, so that it is also the expression of a
    generated column (`Computed`) keeping a value's size beside it. On PostgreSQL the size of a
    JSONB value is only known by writing it out as text (its stored form is compressed binary),
    75-100 ms for an 8 MiB value: computed once when the value is written, a listing that leaves
    big values out reads an integer instead."""

    type = BigInteger()
    name = "text_bytes"
    inherit_cache = True


@compiles(TextBytes, "postgresql")
def _text_bytes_postgresql(element: TextBytes, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"coalesce(octet_length(CAST({column} AS TEXT)), 0)"


@compiles(TextBytes)
def _text_bytes_sqlite(element: TextBytes, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"coalesce(length(CAST({column} AS BLOB)), 0)"


def text_bytes_column(name: str) -> MappedColumn[int]:
    """A model's column holding the size of its JSON column `name` as text (`TextBytes`),
    computed by the database: STORED on PostgreSQL, when the value is written; on SQLite read
    from the value (a VIRTUAL column where a migration added it)."""
    generated = Computed(TextBytes(literal_column(name)), persisted=True)
    return mapped_column(BigInteger, generated, nullable=True)


def disk_bytes(dialect_name: str, column: Any) -> Any:
    """The bytes a column's value takes as stored (0 when NULL): PostgreSQL's datum size,
    compressed or not, read without detoasting the value; SQLite's stored text."""
    if dialect_name == "postgresql":
        return func.coalesce(func.pg_column_size(column), 0)
    return TextBytes(column)


def json_list_length(dialect_name: str, column: Any, key: str) -> Any:
    """How many items the JSON list under `key` of a JSON object column holds (0 when there
    is none, or it is not a list)."""
    if dialect_name == "postgresql":
        item = column.op("->")(key)
        return case((func.jsonb_typeof(item) == "array", func.jsonb_array_length(item)), else_=0)
    return func.coalesce(func.json_array_length(column, f"$.{key}"), 0)
