from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, TimestampMixin
from calcgraph.db.dialect import text_bytes_column


class Job(IdMixin, TimestampMixin, Base):
    """One function execution; also the job store the tick reads results from."""

    __tablename__ = "jobs"
    __table_args__ = (
        # Concurrent ticks can never submit one node of a run twice.
        UniqueConstraint("workflow_run_id", "node_key", "attempt"),
        Index("ix_jobs_user_created", "user_id", "created_at"),
        Index("ix_jobs_status_created", "status", "created_at"),
    )

    # The function and package are the version's: the version's key covers them (a key and an
    # index each cost a trigger and an entry per inserted row; migration 0004_jobs_version_keys).
    function_id: Mapped[str] = mapped_column(String(36))
    function_version_id: Mapped[str] = mapped_column(ForeignKey("function_versions.id"))
    package_id: Mapped[str] = mapped_column(String(36))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    status: Mapped[str] = mapped_column(String(20), default="queued")
    """`queued`, `running`, `success` or `failed`."""
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """What the caller sent, verbatim."""
    resolved_inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The inputs in SI units, as the handler receives them (and the result cache keys on)."""
    outputs: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # The sizes of `inputs` and `outputs` as text, computed by the database when they are
    # written (PostgreSQL; read from the value on SQLite): what a job listing sizes its page by.
    inputs_bytes: Mapped[int] = text_bytes_column("inputs")
    outputs_bytes: Mapped[int] = text_bytes_column("outputs")
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    logs: Mapped[str | None] = mapped_column(Text)
    cache_hit: Mapped[bool] = mapped_column(Boolean, default=False)
    workflow_run_id: Mapped[str | None] = mapped_column(
        ForeignKey("workflow_runs.id", ondelete="CASCADE")
    )
    node_key: Mapped[str | None] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    deliveries: Mapped[int] = mapped_column(Integer, default=0)
    """How many times a message for this job was sent (the sweeper re-sends lost ones)."""
    lease: Mapped[str | None] = mapped_column(String(36))
    """The token of the delivery running the job (set by its claim): only that delivery may
    record its result or release it, so a worker the sweeper gave up on cannot write over the
    attempt that replaced it."""
    heartbeat_at: Mapped[datetime | None]
    """Last sign of life of the worker holding the lease; the sweeper hands a `running` job
    whose heartbeat stopped to another worker."""
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
