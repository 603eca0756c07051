"""Alembic environment. `calcgraph.migrations.runner` hands over a live connection; no ini file."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from calcgraph.migrations.tables import Base

config = context.config
target_metadata = Base.metadata


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place: batch mode rebuilds the table.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `calcgraph migrate`, which opens the connection")
run_with(connection)
