"""Read model of a job, as the contract shows it. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class JobView:
    id: str
    function_id: str
    function_version_id: str
    package_id: str
    user_id: str
    status: str
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    logs: str | None
    cache_hit: bool
    workflow_run_id: str | None
    node_key: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    def sort_key(self) -> tuple[str, str]:
        return (self.created_at.isoformat(), self.id)
