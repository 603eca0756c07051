"""Apply Alembic migrations from code (serve, migrate, tests) on a shared async connection.

Alembic costs most of a second to import. `upgrade` first compares the database's
`alembic_version` with the heads written in the revision files (read as text), and imports
Alembic only when they differ, so a server starting on a migrated database does not pay it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Connection

from calcgraph.db.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
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


def _upgrade(connection: Connection, revision: str) -> None:
    if revision == "heads":
        heads = script_heads()
        if heads is not None and _applied(connection) == heads:
            return
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade(database: Database, revision: str = "heads") -> None:
    """Bring the schema to `revision` (every head: features may add branches that a merge
    revision joins later); a no-op when it is there already."""
    async with database.write_session() as session:
        connection = await session.connection()
        await connection.run_sync(_upgrade, revision)


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
