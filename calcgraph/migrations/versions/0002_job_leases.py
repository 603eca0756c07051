"""job leases and heartbeats: a running job names the delivery that runs it"""

from alembic import op

from calcgraph.migrations.columns import key, moment

revision = "0002_job_leases"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(key("lease", nullable=True))
        batch.add_column(moment("heartbeat_at", nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("lease")
