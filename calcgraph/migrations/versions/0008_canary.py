"""package_canaries, canary_jobs (contract 11, canary deployments)

`package_canaries`: one row per canary deployment, `running` until the workers' timer (or a
promote / roll-back) sets `promoted` or `rolled_back` once. `canary_jobs`: which version of a
running canary each routed unpinned call got; the candidate's are what it is judged on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision = "0008_canary"
down_revision = "0008_deps"


def upgrade() -> None:
    op.create_table(
        "package_canaries",
        sa.Column("package_id", sa.String(length=36), nullable=False),
        sa.Column("candidate", sa.String(length=100), nullable=False),
        sa.Column("current", sa.String(length=100), nullable=True),
        sa.Column("traffic_split", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("error_rate_max", sa.Float(), nullable=True),
        sa.Column("latency_p95_max_ms", sa.Float(), nullable=True),
        sa.Column("started_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("ends_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("decided_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["package_id"], ["packages.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_package_canaries_package_status",
        "package_canaries",
        ["package_id", "status"],
        unique=False,
    )
    op.create_table(
        "canary_jobs",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("canary_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["canary_id"], ["package_canaries.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_index(
        "ix_canary_jobs_canary_version", "canary_jobs", ["canary_id", "version"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_canary_jobs_canary_version", table_name="canary_jobs")
    op.drop_table("canary_jobs")
    op.drop_index("ix_package_canaries_package_status", table_name="package_canaries")
    op.drop_table("package_canaries")
