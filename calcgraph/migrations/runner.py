"""Apply Alembic migrations from code (serve, migrate, tests) on a shared async connection.

Alembic costs most of a second to import. `upgrade` first compares the database's
`alembic_version` with the heads written in the revision files (read as text), and imports
Alembic only when they differ, so a server starting on a migrated database does not pay it.

A database with no table at all (a first `serve`, `calcgraph demo --fresh`, a new test database)
is not migrated revision by revision: the models' tables are created at once and the heads
stamped, as Alembic's `stamp` would (on SQLite, replaying the revisions rebuilt tables in batch
mode and cost most of a second with Alembic's import). `tests/db/test_schema.py` checks that a
database created so and a migrated one have the same schema.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.engine import Connection

from calcgraph.db.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent
_REVISION = re.compile(r"^revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*(?::[^=]*)?=\s*(.+)$", re.M)
_QUOTED = re.compile(r"['\"]([^'\"]+)['\"]")


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


@cache
def script_heads() -> frozenset[str] | None:
    """The head revisions of the revision files, or None when a file cannot be read as
    expected (then Alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        if path.name == "__init__.py":
            continue
        source = path.read_text()
        revision, down = _REVISION.search(source), _DOWN.search(source)
        if revision is None or down is None:
            return None
        revisions.add(revision.group(1))
        parents.update(_QUOTED.findall(down.group(1)))
    heads = revisions - parents
    return frozenset(heads) if heads else None


def _applied(connection: Connection) -> frozenset[str] | None:
    try:
        with connection.begin_nested():
            rows = connection.execute(text("SELECT version_num FROM alembic_version"))
            return frozenset(str(row[0]) for row in rows)
    except Exception:  # no table yet (a fresh database): a migration is pending
        return None


def _version_table(metadata: MetaData) -> Table:
    """Alembic's own `alembic_version` table, as its `stamp` creates it."""
    return Table(
        "alembic_version",
        metadata,
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )


def create_at_heads(connection: Connection, heads: frozenset[str]) -> None:
    """Create every table of the models on an empty database and stamp it at `heads`."""
    from calcgraph.migrations.tables import Base

    Base.metadata.create_all(connection)
    version = _version_table(MetaData())
    version.create(connection)
    connection.execute(version.insert(), [{"version_num": head} for head in sorted(heads)])


def _upgrade(connection: Connection, revision: str, create_empty: bool) -> None:
    if revision == "heads":
        heads = script_heads()
        if heads is not None:
            applied = _applied(connection)
            if applied == heads:
                return
            if create_empty and applied is None and not inspect(connection).get_table_names():
                create_at_heads(connection, heads)
                return
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade(
    database: Database, revision: str = "heads", *, create_empty: bool = True
) -> None:
    """Bring the schema to `revision` (every head: features may add branches that a merge
    revision joins later); a no-op when it is there already. An empty database brought to the
    heads gets the models' tables directly, stamped (`create_empty=False`: the revisions run one
    by one, as on a database that has tables)."""
    async with database.write_session() as session:
        connection = await session.connection()
        await connection.run_sync(_upgrade, revision, create_empty)


async def autogenerate(database: Database, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    from alembic import command

    def _revision(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)

    async with database.write_session() as session:
        connection = await session.connection()
        await connection.run_sync(_revision)
