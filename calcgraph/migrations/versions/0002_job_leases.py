"""job leases and heartbeats: a running job names the delivery that runs it

Revision ID: 0002_job_leases
Revises: 0001
Create Date: 2026-11-23 09:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision: str = "0002_job_leases"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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
