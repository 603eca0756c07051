"""What one user may hold at once (contract 8b, quotas). Pure.

Past a quota that frees itself as work ends (runs not yet terminal, queued jobs) the answer is
429 `QuotaExceeded` with a `retry_after`; past one that waiting does not free (stored bytes) it
is 429 without; a request that can never fit (a workflow version over the node quota) is 422."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from calcgraph.domain.errors import FieldError, QuotaExceeded, ValidationError

GIB = 1024 * 1024 * 1024
RUNS_RETRY_SECONDS = 30
JOBS_RETRY_SECONDS = 5


@dataclass(frozen=True)
class Quotas:
    """Per user; the settings `CALCGRAPH_LIMIT_*` (docs/configuration.md)."""

    runs: int = 200
    """Workflow runs not yet terminal."""
    nodes: int = 20_000
    """Nodes of one workflow version."""
    queued_jobs: int = 1_000
    """Jobs submitted and not yet started."""
    stored_bytes: int = 5 * GIB
    """Inputs, outputs and logs of the user's jobs, as stored."""


def check_nodes(document: object, quotas: Quotas) -> None:
    """A graph over the node quota can never be saved: 422, before any other work on it."""
    nodes = document.get("nodes") if isinstance(document, Mapping) else None
    if isinstance(nodes, list) and len(nodes) > quotas.nodes:
        raise ValidationError(
            f"the graph has {len(nodes)} nodes; a workflow version holds at most "
            f"{quotas.nodes} (CALCGRAPH_LIMIT_NODES_PER_WORKFLOW)",
            [FieldError(("body", "graph", "nodes"), f"at most {quotas.nodes} nodes")],
        )


def check_runs(unfinished: int, quotas: Quotas) -> None:
    if unfinished >= quotas.runs:
        raise QuotaExceeded(
            f"you have {unfinished} runs not yet terminal, the most one user may have "
            f"({quotas.runs}); wait for some to end or cancel them",
            {"retry_after": RUNS_RETRY_SECONDS},
        )


def check_jobs(queued: int, stored: int, quotas: Quotas) -> None:
    if stored >= quotas.stored_bytes:
        raise QuotaExceeded(
            f"your jobs' inputs, outputs and logs take {stored} bytes, the most one user may "
            f"store ({quotas.stored_bytes})"
        )
    if queued >= quotas.queued_jobs:
        raise QuotaExceeded(
            f"you have {queued} jobs queued, the most one user may have ({quotas.queued_jobs}); "
            "wait for some to start",
            {"retry_after": JOBS_RETRY_SECONDS},
        )


def over_storage(stored: int, adding: int, quotas: Quotas) -> bool:
    """Whether a result of `adding` bytes would take the user past the storage quota."""
    return stored + adding > quotas.stored_bytes
