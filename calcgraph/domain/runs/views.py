"""Read models of workflow runs. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from calcgraph.domain.runs.state import NodeState


@dataclass(frozen=True)
class RunView:
    id: str
    workflow_id: str
    workflow_version_id: str
    user_id: str
    status: str
    inputs: dict[str, Any]
    terminal_outputs: dict[str, Any] | None
    error_message: str | None
    first_failed_node_key: str | None
    plan_snapshot: dict[str, Any]
    revision: int
    started_at: datetime
    completed_at: datetime | None
    node_states: Mapping[str, NodeState] | None = None
    """Every function and extract node; None in listings, which leave them out."""
    rerun_of: str | None = None
    """The run this one re-runs (contract section 10)."""
    retry_at: datetime | None = None
    """The earliest retry of its nodes still to be submitted."""
    since: int | None = None
    """Set when `node_states` holds only the nodes changed after this revision (and
    `plan_snapshot` is left empty): a poller's answer that costs what changed."""
    terminal_outputs_omitted: bool = False
    """A listing left the terminal outputs out (over 64 KiB, contract 8b)."""

    def sort_key(self) -> tuple[str, str]:
        return (self.started_at.isoformat(), self.id)

    def function_versions(self) -> dict[str, str]:
        """node_key -> function version id of every function node, from the frozen plan."""
        return function_versions(self.plan_snapshot)


def function_versions(plan_snapshot: Mapping[str, Any]) -> dict[str, str]:
    """node_key -> function version id of every function node of a frozen plan."""
    return {
        node["node_key"]: node["function_version_id"]
        for node in plan_snapshot.get("nodes", ())
        if node.get("kind") == "function" and node.get("function_version_id")
    }


@dataclass(frozen=True)
class NodeRow:
    """A node state with its run and key, as GraphQL lists them."""

    run_id: str
    node_key: str
    kind: str
    state: NodeState
