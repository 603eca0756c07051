"""events, webhooks, webhook_deliveries, event_cursors (contract section 9)"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from calcgraph.migrations.columns import (
    Cascading,
    create_table,
    document,
    flag,
    identity,
    key,
    moment,
    number,
    text,
)

revision = "0006_events"
down_revision = "0005_node_states_running"


def upgrade() -> None:
    create_table(
        "events",
        key("id"),
        sa.Column("position", sa.BigInteger(), nullable=True),
        text("type", 100),
        key("subject"),
        text("subject_kind", 16),
        moment("recorded_at"),
        document("data"),
        unique=[("position",)],
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
    create_table(
        "webhooks",
        *identity(),
        key("user_id"),
        text("url", 2048),
        document("types"),
        text("description", 500),
        text("secret", 100),
        flag("enabled"),
        number("failed_in_a_row"),
        references={"user_id": Cascading("users")},
        indexes={"ix_webhooks_user": ["user_id"]},
    )
    create_table(
        "webhook_deliveries",
        key("id"),
        key("webhook_id"),
        key("event_id"),
        text("type", 100),
        number("attempt"),
        text("state", 16),
        number("status_code", nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        number("duration_ms", nullable=True),
        moment("attempted_at", nullable=True),
        moment("next_attempt_at", nullable=True),
        moment("lease_until", nullable=True),
        moment("first_created_at"),
        moment("created_at"),
        references={"event_id": Cascading("events"), "webhook_id": Cascading("webhooks")},
        unique=[("webhook_id", "event_id", "attempt")],
        indexes={
            "ix_webhook_deliveries_due": ["state", "next_attempt_at"],
            "ix_webhook_deliveries_webhook": ["webhook_id", "created_at"],
        },
    )
    create_table(
        "event_cursors",
        text("name", 50),
        sa.Column("position", sa.BigInteger(), nullable=False),
        primary_key=("name",),
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
