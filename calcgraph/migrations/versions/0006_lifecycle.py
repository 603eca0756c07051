"""function_versions.resources, package_deployment_events (contract 11)

`resources: {memory_mb, cpus, timeout_s}` or `profile: compute`, resolved to the declared
figures; NULL when the function declares none (the worker's limits apply).
`package_deployment_events`: the history of a package's current version (deployed, promoted,
rolled back).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision = "0006_lifecycle"
down_revision = "0006_runctl"


def upgrade() -> None:
    with op.batch_alter_table("function_versions") as batch:
        batch.add_column(sa.Column("resources", calcgraph.db.base.JSONType, nullable=True))
    op.create_table(
        "package_deployment_events",
        sa.Column("package_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["package_id"], ["packages.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_package_deployment_events_package",
        "package_deployment_events",
        ["package_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_package_deployment_events_package", table_name="package_deployment_events")
    op.drop_table("package_deployment_events")
    with op.batch_alter_table("function_versions") as batch:
        batch.drop_column("resources")
