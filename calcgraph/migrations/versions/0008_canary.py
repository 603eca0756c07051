"""package_canaries, canary_jobs (contract 11, canary deployments)

`package_canaries`: one row per canary deployment, `running` until the workers' timer (or a
promote / roll-back) sets `promoted` or `rolled_back` once. `canary_jobs`: which version of a
running canary each routed unpinned call got; the candidate's are what it is judged on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from calcgraph.migrations.columns import (
    Cascading,
    create_table,
    document,
    identity,
    key,
    moment,
    text,
)

revision = "0008_canary"
down_revision = "0008_deps"


def upgrade() -> None:
    create_table(
        "package_canaries",
        key("package_id"),
        text("candidate", 100),
        text("current", 100, nullable=True),
        document("traffic_split"),
        sa.Column("error_rate_max", sa.Float(), nullable=True),
        sa.Column("latency_p95_max_ms", sa.Float(), nullable=True),
        moment("started_at"),
        moment("ends_at"),
        text("status", 20),
        moment("decided_at", nullable=True),
        text("reason", 500, nullable=True),
        *identity(),
        references={"package_id": Cascading("packages")},
        indexes={"ix_package_canaries_package_status": ["package_id", "status"]},
    )
    create_table(
        "canary_jobs",
        key("job_id"),
        key("canary_id"),
        text("version", 100),
        references={"job_id": Cascading("jobs"), "canary_id": Cascading("package_canaries")},
        primary_key=("job_id",),
        indexes={"ix_canary_jobs_canary_version": ["canary_id", "version"]},
    )


def downgrade() -> None:
    op.drop_index("ix_canary_jobs_canary_version", table_name="canary_jobs")
    op.drop_table("canary_jobs")
    op.drop_index("ix_package_canaries_package_status", table_name="package_canaries")
    op.drop_table("package_canaries")
