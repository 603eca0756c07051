"""The schema on both databases: migrations match the models, an empty database created at the
heads has the migrated schema, SQLite runs in lockstep."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, inspect, select, text, update
from sqlalchemy.engine import Connection

from calcgraph.db.engine import Database
from calcgraph.migrations.runner import alembic_config, upgrade
from calcgraph.migrations.tables import (
    Base,
    NodeState,
    Organization,
    User,
    Workflow,
    WorkflowRun,
    WorkflowVersion,
)
from tests.conftest import POSTGRES_URL, _reset_postgres

# SQLite's reflection skips expression indexes (the unique lower(name) ones of contract 8b),
# and so Alembic cannot compare them there; PostgreSQL reflects and compares them.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index"),
    pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based"),
]


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _schema(connection: Connection) -> dict[str, object]:
    """Everything the database says of its tables, in an order that does not depend on how
    they were made (a table rebuilt by a migration lists its columns in another order)."""
    inspector = inspect(connection)
    tables: dict[str, object] = {}
    for name in sorted(inspector.get_table_names()):
        columns = {
            column["name"]: (
                str(column["type"]),
                column["nullable"],
                column.get("default"),
                column.get("autoincrement"),
            )
            for column in inspector.get_columns(name)
        }
        primary = inspector.get_pk_constraint(name)
        tables[name] = {
            "columns": columns,
            "primary_key": (primary.get("name"), primary["constrained_columns"]),
            "foreign_keys": sorted(
                (
                    key.get("name") or "",
                    tuple(key["constrained_columns"]),
                    key["referred_table"],
                    tuple(key["referred_columns"]),
                    tuple(sorted((key.get("options") or {}).items())),
                )
                for key in inspector.get_foreign_keys(name)
            ),
            "indexes": sorted(
                (index.get("name") or "", tuple(index["column_names"]), index["unique"])
                for index in inspector.get_indexes(name)
            ),
            "unique": sorted(
                (unique.get("name") or "", tuple(unique["column_names"]))
                for unique in inspector.get_unique_constraints(name)
            ),
            "checks": sorted(
                (check.get("name") or "", check["sqltext"])
                for check in inspector.get_check_constraints(name)
            ),
        }
    return tables


async def _empty_database(backend: str, tmp_path: Path, name: str) -> Database:
    if backend == "sqlite":
        return Database(f"sqlite+aiosqlite:///{tmp_path / f'{name}.db'}")
    url = f"{POSTGRES_URL}_{name}"
    await _reset_postgres(url)
    return Database(url)


async def _versions(database: Database) -> set[str]:
    async with database.read_session() as session:
        return set((await session.scalars(text("SELECT version_num FROM alembic_version"))).all())


class TestMigrations:
    async def test_migrated_schema_matches_the_models(self, backend: str, tmp_path: Path) -> None:
        database = await _empty_database(backend, tmp_path, "migrated")
        try:
            await upgrade(database, create_empty=False)
            async with database.engine.connect() as conn:
                assert await conn.run_sync(_diff) == []
        finally:
            await database.dispose()

    async def test_an_empty_database_is_created_at_the_heads_as_migrated(
        self, backend: str, tmp_path: Path
    ) -> None:
        """A first start creates the models' tables and stamps the heads instead of running
        every revision: the schema is the one the revisions build, column for column, key for
        key, index for index, and a later upgrade starts from the same stamp."""
        created = await _empty_database(backend, tmp_path, "created")
        migrated = await _empty_database(backend, tmp_path, "migrated")
        try:
            await upgrade(created)
            await upgrade(migrated, create_empty=False)
            async with created.engine.connect() as conn:
                created_schema = await conn.run_sync(_schema)
            async with migrated.engine.connect() as conn:
                migrated_schema = await conn.run_sync(_schema)
            heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())
            assert await _versions(created) == await _versions(migrated) == heads
        finally:
            await created.dispose()
            await migrated.dispose()
        assert set(created_schema) == set(migrated_schema)
        assert "jobs" in created_schema
        for table in migrated_schema:
            assert created_schema[table] == migrated_schema[table], table

    async def test_a_database_with_tables_is_not_created_over(self, tmp_path: Path) -> None:
        """Tables but no stamp (a database some other tool filled): the revisions run, and
        fail on the table that is there, rather than a silent create beside it."""
        database = Database(f"sqlite+aiosqlite:///{tmp_path / 'foreign.db'}")
        try:
            async with database.write_session() as session:
                await session.execute(text("CREATE TABLE code_blobs (sha256 VARCHAR(64))"))
            with pytest.raises(Exception, match="(?i)already exists"):
                await upgrade(database)
        finally:
            await database.dispose()

    async def test_upgrade_again_is_a_no_op(self, database_url: str) -> None:
        database = Database(database_url)
        try:
            await upgrade(database)
            async with database.read_session() as session:
                applied = set(
                    (await session.scalars(text("SELECT version_num FROM alembic_version"))).all()
                )
        finally:
            await database.dispose()
        assert applied == set(ScriptDirectory.from_config(alembic_config()).get_heads())

    async def test_a_created_database_upgrades_as_a_migrated_one(self, tmp_path: Path) -> None:
        """The stamp is Alembic's own: Alembic reads it back as the current heads."""
        database = Database(f"sqlite+aiosqlite:///{tmp_path / 'stamped.db'}")
        try:
            await upgrade(database)

            def current(connection: Connection) -> set[str]:
                return set(MigrationContext.configure(connection).get_current_heads())

            async with database.engine.connect() as conn:
                assert await conn.run_sync(current) == set(
                    ScriptDirectory.from_config(alembic_config()).get_heads()
                )
            await upgrade(database, create_empty=False)  # nothing to do, no error
        finally:
            await database.dispose()


@pytest.fixture
async def sqlite_database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'lockstep.db'}")
    await upgrade(database)
    yield database
    await database.dispose()


class TestSqliteLockstep:
    async def test_pragmas(self, sqlite_database: Database) -> None:
        async with sqlite_database.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 5000

    async def test_write_sessions_begin_immediate(self, sqlite_database: Database) -> None:
        seen: list[str] = []

        @event.listens_for(sqlite_database.engine.sync_engine, "before_cursor_execute")
        def record(conn: object, cursor: object, statement: str, *args: object) -> None:
            seen.append(statement)

        async with sqlite_database.write_session() as session:
            await session.execute(text("SELECT 1"))
        async with sqlite_database.read_session() as session:
            await session.execute(text("SELECT 1"))
        begins = [s for s in seen if s.startswith("BEGIN")]
        assert begins == ["BEGIN IMMEDIATE", "BEGIN DEFERRED"]

    async def test_a_second_writer_waits_instead_of_failing(
        self, sqlite_database: Database
    ) -> None:
        """Two concurrent write sessions serialise on the lock; neither sees SQLITE_BUSY."""
        order: list[str] = []

        async def writer(name: str, hold: float) -> None:
            async with sqlite_database.write_session() as session:
                session.add(Organization(slug=name, name=name))
                await session.flush()  # BEGIN IMMEDIATE runs here, with the first statement
                order.append(f"{name}-in")
                await asyncio.sleep(hold)
                order.append(f"{name}-out")

        await asyncio.gather(writer("first", 0.2), writer("second", 0))
        assert order in (
            ["first-in", "first-out", "second-in", "second-out"],
            ["second-in", "second-out", "first-in", "first-out"],
        )


async def _user(database: Database) -> User:
    async with database.write_session() as session:
        user = User(subject="sub-1", username="alice", roles=["user"])
        session.add(user)
        await session.flush()
    return user


class TestForeignKeys:
    async def test_foreign_keys_are_enforced(self, database: Database) -> None:
        async def orphan() -> None:
            async with database.write_session() as session:
                session.add(
                    Workflow(slug="w", name="w", owner_id="no-such-user", visibility="private")
                )

        with pytest.raises(Exception, match="(?i)foreign key"):
            await orphan()


class TestColumns:
    async def test_timestamps_come_back_aware_in_utc(self, database: Database) -> None:
        user = await _user(database)
        moment = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
        async with database.write_session() as session:
            await session.execute(update(User).where(User.id == user.id).values(updated_at=moment))
        async with database.read_session() as session:
            stored = await session.scalar(select(User.updated_at).where(User.id == user.id))
        assert stored == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
        assert stored is not None
        assert stored.tzinfo is not None

    async def test_naive_datetimes_are_refused(self, database: Database) -> None:
        async def naive() -> None:
            async with database.write_session() as session:
                session.add(Organization(slug="o", name="o", created_at=datetime(2026, 1, 1)))  # noqa: DTZ001

        with pytest.raises(Exception, match="naive"):
            await naive()

    async def test_json_round_trips(self, database: Database) -> None:
        user = await _user(database)
        async with database.read_session() as session:
            loaded = await session.get(User, user.id)
        assert loaded is not None
        assert loaded.roles == ["user"]


class TestNodeStates:
    async def test_a_tick_writes_only_the_nodes_that_changed(self, database: Database) -> None:
        """One row per node: updating two nodes of a 1,000-node run touches two rows."""
        user = await _user(database)
        async with database.write_session() as session:
            workflow = Workflow(slug="big", name="big", owner_id=user.id, visibility="private")
            session.add(workflow)
            await session.flush()
            version = WorkflowVersion(workflow_id=workflow.id, version=1, graph={"nodes": []})
            session.add(version)
            await session.flush()
            run = WorkflowRun(
                workflow_id=workflow.id,
                workflow_version_id=version.id,
                user_id=user.id,
                inputs={},
                resolved_inputs={},
                plan_snapshot={"chains": [], "waves": []},
            )
            session.add(run)
            await session.flush()
            session.add_all(
                NodeState(run_id=run.id, node_key=f"n{i:04d}", kind="function") for i in range(1000)
            )
        writes: list[tuple[str, object]] = []

        def record(
            conn: object, cursor: object, statement: str, params: object, *a: object
        ) -> None:
            if statement.startswith(("UPDATE", "INSERT", "DELETE")):
                writes.append((statement, params))

        event.listen(database.engine.sync_engine, "before_cursor_execute", record)
        try:
            async with database.write_session() as session:
                states = (
                    await session.scalars(
                        select(NodeState)
                        .where(NodeState.run_id == run.id)
                        .order_by(NodeState.node_key)
                    )
                ).all()
                for state in states[:2]:
                    state.status = "running"
        finally:
            event.remove(database.engine.sync_engine, "before_cursor_execute", record)
        assert len(writes) == 1
        statement, params = writes[0]
        assert statement.startswith("UPDATE node_states")
        assert isinstance(params, list | tuple)
        assert len(params) == 2
        async with database.read_session() as session:
            running = (
                await session.scalars(
                    select(NodeState.node_key).where(
                        NodeState.run_id == run.id, NodeState.status == "running"
                    )
                )
            ).all()
        assert sorted(running) == ["n0000", "n0001"]
