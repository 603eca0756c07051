"""Recorded events (contract section 9), webhooks and their delivery attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, TimestampMixin


class Event(Base):
    """One event, written in the unit of work of the change it reports. Its `position` is
    given by that unit's last statement, under the sequencer's lock held to its commit (the
    `sequence` cursor's row), so in commit order (`EventRepository.insert_numbered`; an event
    written without one is numbered by `EventRepository.sequence`): a reader that follows
    positions never passes over an event committed later with an earlier number."""

    __tablename__ = "events"
    __table_args__ = (
        Index(
            "ix_events_unsequenced",
            "recorded_at",
            postgresql_where=text("position IS NULL"),
            sqlite_where=text("position IS NULL"),
        ),
        Index("ix_events_subject_position", "subject", "position"),
        Index("ix_events_recorded_at", "recorded_at"),
        Index("ix_events_run_position", "run_id", "position"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    position: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    type: Mapped[str] = mapped_column(String(100))
    subject: Mapped[str] = mapped_column(String(36))
    subject_kind: Mapped[str] = mapped_column(String(16))
    """`job`, `run`, `package`, `function`, `user` or `webhook`: whose rules say who sees it."""
    recorded_at: Mapped[datetime]
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    run_id: Mapped[str | None] = mapped_column(String(36))
    """The workflow run it belongs to (`catalog.run_of`): the pull's `run` filter reads one
    index range, not the jobs of the run. Not part of the envelope."""


class Webhook(IdMixin, TimestampMixin, Base):
    __tablename__ = "webhooks"
    __table_args__ = (Index("ix_webhooks_user", "user_id"),)

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    types: Mapped[list[str]] = mapped_column(JSONType)
    description: Mapped[str] = mapped_column(String(500), default="")
    secret: Mapped[str] = mapped_column(String(100))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    failed_in_a_row: Mapped[int] = mapped_column(Integer, default=0)
    """Events whose delivery ended `failed`, since the last one delivered."""


class WebhookDelivery(IdMixin, Base):
    """One attempt to deliver one event to one webhook. Attempt 1 is written when the event is
    fanned out (`pending`); a failed attempt becomes `retrying` and writes the next one, due at
    `next_attempt_at`, or `failed` when the schedule is spent."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id", "attempt"),
        Index("ix_webhook_deliveries_due", "state", "next_attempt_at"),
        Index("ix_webhook_deliveries_webhook", "webhook_id", "created_at"),
    )

    webhook_id: Mapped[str] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(100))
    attempt: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    """`pending` (not tried yet), `delivered`, `retrying` (a later attempt follows), `failed`."""
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    attempted_at: Mapped[datetime | None]
    next_attempt_at: Mapped[datetime | None]
    lease_until: Mapped[datetime | None]
    """A worker took this attempt until then: past it, a killed worker's attempt is sent again."""
    first_created_at: Mapped[datetime]
    """When attempt 1 was written: the schedule ends 24 h (its sum) after it."""
    created_at: Mapped[datetime]


class EventCursor(Base):
    """How far a consumer of the event log has read (the webhook fan-out)."""

    __tablename__ = "event_cursors"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger, default=0)
