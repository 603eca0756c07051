"""function_versions.resources: the per-function limits a manifest declares (contract 11)

`resources: {memory_mb, cpus, timeout_s}` or `profile: compute`, resolved to the declared
figures; NULL when the function declares none (the worker's limits apply).

Revision ID: 0006_lifecycle
Revises: 0005_node_states_running
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision: str = "0006_lifecycle"
down_revision: str | Sequence[str] | None = "0005_node_states_running"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("function_versions") as batch:
        batch.add_column(sa.Column("resources", calcgraph.db.base.JSONType, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("function_versions") as batch:
        batch.drop_column("resources")
