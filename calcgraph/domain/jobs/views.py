"""Read model of a job, as the contract shows it. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from calcgraph.domain.functions.deprecation import Deprecation

JOB_STATUSES = ("queued", "running", "success", "failed")
"""A job's statuses (a cancelled job ends `failed`, error kind `cancelled`)."""
TERMINAL = frozenset({"success", "failed"})
"""The statuses a job ends in."""

JOB_FIELDS = (
    "id",
    "status",
    "function_id",
    "function_version_id",
    "package_id",
    "inputs",
    "outputs",
    "error",
    "logs",
    "cache_hit",
    "created_at",
    "started_at",
    "finished_at",
    "workflow_run_id",
    "node_key",
)
"""The fields a read of chosen fields may ask for (the repository's `visible_fields_*`): a job
as the contract shows it, with its run and node."""


@dataclass(frozen=True)
class JobView:
    id: str
    function_id: str
    function_version_id: str
    package_id: str
    user_id: str
    status: str
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    logs: str | None
    cache_hit: bool
    workflow_run_id: str | None
    node_key: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    outputs_omitted: bool = False
    """Listings leave outputs over 64 KiB out (contract 8b); `GET /jobs/{id}` reads them."""
    inputs_omitted: bool = False
    """Listings leave inputs over 64 KiB out too (they may hold upstream outputs)."""


@dataclass(frozen=True)
class Executed:
    """An execute call's answer: the job, and the deprecation of the version it ran (contract
    11: the doors show it as a `Deprecation` header and `warnings`)."""

    job: JobView
    deprecation: Deprecation | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        return (self.deprecation.warning,) if self.deprecation is not None else ()
