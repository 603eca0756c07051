"""What one user holds now, as admins read it. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UsageView:
    user_id: str
    username: str
    unfinished_runs: int
    jobs: int
    queued_jobs: int
    stored_bytes: int
    largest_workflow_nodes: int
    """Nodes of the largest workflow version of the workflows the user owns."""
