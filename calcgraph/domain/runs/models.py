from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, false, text
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, utcnow
from calcgraph.db.dialect import text_bytes_column


class WorkflowRun(IdMixin, Base):
    __tablename__ = "workflow_runs"
    __table_args__ = (
        Index("ix_workflow_runs_status", "status"),
        Index("ix_workflow_runs_workflow_started", "workflow_id", "started_at"),
        Index("ix_workflow_runs_user_started", "user_id", "started_at"),
    )

    workflow_id: Mapped[str] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    workflow_version_id: Mapped[str] = mapped_column(ForeignKey("workflow_versions.id"))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """Echoed back verbatim."""
    resolved_inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The same inputs with quantities in SI, as functions receive them."""
    terminal_outputs: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error_message: Mapped[str | None] = mapped_column(String(4000))
    first_failed_node_key: Mapped[str | None] = mapped_column(String(200))
    plan_snapshot: Mapped[dict[str, Any]] = mapped_column(JSONType)
    # The sizes of the JSON values a run listing sizes its page by, as text, computed by the
    # database when they are written (PostgreSQL; read from the value on SQLite).
    inputs_bytes: Mapped[int] = text_bytes_column("inputs")
    plan_snapshot_bytes: Mapped[int] = text_bytes_column("plan_snapshot")
    terminal_outputs_bytes: Mapped[int] = text_bytes_column("terminal_outputs")
    revision: Mapped[int] = mapped_column(Integer, default=0)
    """Bumped by every tick that changes something: cheap change detection for pollers."""
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    completed_at: Mapped[datetime | None]
    retry_at: Mapped[datetime | None]
    """The earliest retry of its nodes not yet submitted (contract section 10): a tick at or
    after it has work even when no job finished."""
    rerun_of: Mapped[str | None] = mapped_column(String(36))
    """The run this one re-runs (`POST /workflow-runs/{id}/rerun`)."""
    cache_refresh: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Created with `"cache": "refresh"`: its jobs are never answered from the result cache."""


class NodeState(Base):
    """One row per function or extract node of a run, so a tick writes only what changed."""

    __tablename__ = "node_states"
    __table_args__ = (
        # The tick's "running nodes" probe: rows by (run, status), never a scan of the run.
        Index("ix_node_states_run_status", "run_id", "status"),
        # Node states changed after a revision (`POST .../tick?since=N`): O(changed rows).
        Index("ix_node_states_run_revision", "run_id", "revision"),
        # The tick's running nodes and their jobs (as many rows as the run has in flight).
        # The (run, status) index fits as well, but PostgreSQL read them through the (run,
        # revision) one on statistics taken while the table was small (both estimated at one
        # row; that index is the smaller), every node of the run: this one holds only the
        # running nodes, the smallest whatever the statistics.
        Index(
            "ix_node_states_running",
            "run_id",
            "job_id",
            postgresql_where=text("status = 'running'"),
            sqlite_where=text("status = 'running'"),
        ),
    )

    run_id: Mapped[str] = mapped_column(
        ForeignKey("workflow_runs.id", ondelete="CASCADE"), primary_key=True
    )
    node_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    """`function` or `extract`."""
    status: Mapped[str] = mapped_column(String(20), default="pending")
    job_id: Mapped[str | None] = mapped_column(String(36))
    outputs: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    outputs_bytes: Mapped[int] = text_bytes_column("outputs")
    """The outputs' size as text, computed by the database when they are written: an answer
    leaves outputs over 64 KiB out without reading them (`HELD_STATE_COLUMNS`)."""
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The run's revision when the tick last wrote this row (0: as created)."""
    retry_at: Mapped[datetime | None]
    attempts: Mapped[list[Any] | None] = mapped_column(JSONType)
    """Earlier failed attempts that were retried: `[{"attempt", "job_id", "error"}]`."""
    reused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ChainStart(Base):
    """A job a chain worker started for a node its run still shows pending, not yet adopted by
    a tick: written with the job under the run's lock, deleted by the tick that adopts it. The
    tick reads these few rows instead of probing every job of the run."""

    __tablename__ = "chain_starts"

    run_id: Mapped[str] = mapped_column(
        ForeignKey("workflow_runs.id", ondelete="CASCADE"), primary_key=True
    )
    job_id: Mapped[str] = mapped_column(String(36), primary_key=True)
