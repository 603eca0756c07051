"""A workflow version as each run of it starts (`create.service`, remembered in the memo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calcgraph.domain.workflows.graph import InputNode
from calcgraph.domain.workflows.planner import Plan


@dataclass(frozen=True)
class PlannedVersion:
    """What every run of one workflow version starts from, made once per version: its input
    nodes (a run's inputs are checked against them), its plan frozen with its function
    versions' retry defaults (immutable, as the version is), and that plan's snapshot (each
    run's `plan_snapshot`), also written as JSON once. Shared by the runs, never changed."""

    input_nodes: tuple[InputNode, ...]
    frozen: Plan
    snapshot: dict[str, Any]
    written: str
    """The snapshot as JSON text (`json.dumps`), as each run's row stores it."""
