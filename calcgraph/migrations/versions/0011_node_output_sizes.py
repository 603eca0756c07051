"""node_states.outputs_bytes: a node's outputs' size as text, a generated column

A run's answer leaves node outputs over 64 KiB out (contract 8b), but read every one whole to
measure it: in the soak of issue 27 a run whose three nodes output 8 MiB each cost each
`GET /workflow-runs/{id}` 24 MiB decoded and written out again as JSON on the event loop, and
/health waited behind it. With the size beside the value, the answer's statement leaves the big
ones in the database (STORED on PostgreSQL; VIRTUAL on SQLite, as in 0010).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from calcgraph.db.dialect import TextBytes

revision = "0011_node_output_sizes"
down_revision = "0010_value_sizes"


def upgrade() -> None:
    # SQLite adds no STORED column to a table that exists (a new database gets one).
    stored = op.get_bind().dialect.name == "postgresql"
    generated = sa.Computed(TextBytes(sa.literal_column("outputs")), persisted=stored)
    op.add_column(
        "node_states", sa.Column("outputs_bytes", sa.BigInteger(), generated, nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("node_states") as batch_op:
        batch_op.drop_column("outputs_bytes")
