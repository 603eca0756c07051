"""Join the two branches of the second revision: job leases (heartbeats) and the tick at scale."""

from __future__ import annotations

revision = "0003"
down_revision = ("0002", "0002_job_leases")


def upgrade() -> None:
    """Nothing to change: both branches are applied."""


def downgrade() -> None:
    """Nothing to change."""
