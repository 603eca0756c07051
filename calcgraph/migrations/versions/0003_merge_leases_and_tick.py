"""Join the two branches of the second revision: job leases (heartbeats) and the tick at scale.

Revision ID: 0003
Revises: 0002, 0002_job_leases
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0003"
down_revision: str | Sequence[str] | None = ("0002", "0002_job_leases")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Nothing to change: both branches are applied."""


def downgrade() -> None:
    """Nothing to change."""
