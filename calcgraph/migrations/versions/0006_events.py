"""events, webhooks, webhook_deliveries, event_cursors (contract section 9)"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from calcgraph.db.base import UTCDateTime

revision = "0006_events"
down_revision = "0005_node_states_running"

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=True),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=36), nullable=False),
        sa.Column("subject_kind", sa.String(length=16), nullable=False),
        sa.Column("recorded_at", UTCDateTime(), nullable=False),
        sa.Column("data", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("position", name=op.f("uq_events_position")),
    )
    op.create_index(
        "ix_events_unsequenced",
        "events",
        ["recorded_at"],
        unique=False,
        postgresql_where=sa.text("position IS NULL"),
        sqlite_where=sa.text("position IS NULL"),
    )
    op.create_index("ix_events_subject_position", "events", ["subject", "position"])
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("types", _JSON, nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("failed_in_a_row", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_webhooks_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_index("ix_webhooks_user", "webhooks", ["user_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("webhook_id", sa.String(length=36), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("attempted_at", UTCDateTime(), nullable=True),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("first_created_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_webhook_deliveries_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_webhook_deliveries_webhook_id_webhooks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "webhook_id",
            "event_id",
            "attempt",
            name=op.f("uq_webhook_deliveries_webhook_id_event_id_attempt"),
        ),
    )
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["state", "next_attempt_at"])
    op.create_index(
        "ix_webhook_deliveries_webhook", "webhook_deliveries", ["webhook_id", "created_at"]
    )
    op.create_table(
        "event_cursors",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_event_cursors")),
    )


def downgrade() -> None:
    op.drop_table("event_cursors")
    op.drop_index("ix_webhook_deliveries_webhook", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhooks_user", table_name="webhooks")
    op.drop_table("webhooks")
    op.drop_index("ix_events_recorded_at", table_name="events")
    op.drop_index("ix_events_subject_position", table_name="events")
    op.drop_index("ix_events_unsequenced", table_name="events")
    op.drop_table("events")
