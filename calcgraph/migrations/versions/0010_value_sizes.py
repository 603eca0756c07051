"""The JSON values' sizes as text beside them, generated columns: jobs.inputs_bytes,
jobs.outputs_bytes, workflow_runs.inputs_bytes, .plan_snapshot_bytes, .terminal_outputs_bytes

A listing leaves values over 64 KiB out and sizes its page by them (contract 8b). On PostgreSQL
it asked `octet_length(CAST(value AS TEXT))` of every row of the page, which decompresses each
stored value and writes it out as text: 75-100 ms for an 8 MiB output, at every listing.
Generated columns compute it once, when the value is written (STORED on PostgreSQL, which
computes one again only when its value changes; VIRTUAL on SQLite, whose stored text is
measured as cheaply when read).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from calcgraph.db.dialect import TextBytes

revision = "0010_value_sizes"
down_revision = "0009_events_run"

SIZED = {
    "jobs": ("inputs", "outputs"),
    "workflow_runs": ("inputs", "plan_snapshot", "terminal_outputs"),
}


def upgrade() -> None:
    # SQLite adds no STORED column to a table that exists (a new database gets one).
    stored = op.get_bind().dialect.name == "postgresql"
    for table, columns in SIZED.items():
        for name in columns:
            generated = sa.Computed(TextBytes(sa.literal_column(name)), persisted=stored)
            op.add_column(
                table, sa.Column(f"{name}_bytes", sa.BigInteger(), generated, nullable=True)
            )


def downgrade() -> None:
    for table, columns in SIZED.items():
        with op.batch_alter_table(table) as batch_op:
            for name in columns:
                batch_op.drop_column(f"{name}_bytes")
