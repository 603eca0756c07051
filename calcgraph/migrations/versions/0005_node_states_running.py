"""node_states: an index of the running nodes of each run

The tick reads a run's running nodes (and the jobs they wait on) by `run_id` and `status =
'running'`. The (run, status) index fits, but on statistics taken while the table was small
PostgreSQL estimated one row through either index and took the (run, revision) one, the
smaller: every node of the run per tick (9,900 rows discarded at 10,000 nodes). This partial
index holds only the running nodes, the smallest whatever the statistics.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_node_states_running"
down_revision = "0004_jobs_version_keys"


def upgrade() -> None:
    op.create_index(
        "ix_node_states_running",
        "node_states",
        ["run_id", "job_id"],
        unique=False,
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    )


def downgrade() -> None:
    op.drop_index("ix_node_states_running", table_name="node_states")
