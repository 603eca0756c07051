"""job leases and heartbeats: a running job names the delivery that runs it"""

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision = "0002_job_leases"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("lease", sa.String(length=36), nullable=True))
        batch.add_column(
            sa.Column("heartbeat_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("lease")
