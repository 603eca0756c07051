"""run control: retries, re-runs and cache refresh (contract section 10)

Node states gain `retry_at` (a retried node's next attempt is due then), `attempts` (its earlier
failed attempts) and `reused` (a re-run's node that took the original run's result); runs gain
`retry_at` (the earliest due retry, so a tick that finds no finished job still knows it has
work), `rerun_of` and `cache_refresh`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from calcgraph.migrations.columns import document, key, moment

revision = "0006_runctl"
down_revision = "0006_events"


def upgrade() -> None:
    with op.batch_alter_table("node_states", schema=None) as batch:
        batch.add_column(moment("retry_at", nullable=True))
        batch.add_column(document("attempts", nullable=True))
        batch.add_column(
            sa.Column("reused", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("workflow_runs", schema=None) as batch:
        batch.add_column(moment("retry_at", nullable=True))
        batch.add_column(key("rerun_of", nullable=True))
        batch.add_column(
            sa.Column("cache_refresh", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("workflow_runs", schema=None) as batch:
        batch.drop_column("cache_refresh")
        batch.drop_column("rerun_of")
        batch.drop_column("retry_at")
    with op.batch_alter_table("node_states", schema=None) as batch:
        batch.drop_column("reused")
        batch.drop_column("attempts")
        batch.drop_column("retry_at")
