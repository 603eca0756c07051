"""Apply Alembic migrations from code (serve, migrate, tests) on a shared async connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from calcgraph.db.engine import Database

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _upgrade(connection: Connection, revision: str) -> None:
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

    def _revision(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)

    async with database.write_session() as session:
        connection = await session.connection()
        await connection.run_sync(_revision)
