"""Read models of workflows and their versions. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from calcgraph.domain.access.views import OwnedView


@dataclass(frozen=True)
class WorkflowVersionView:
    id: str
    workflow_id: str
    version: int
    graph: dict[str, Any]
    resolved_functions: dict[str, Any]
    """node_key of each function node to the function version id it runs."""
    created_at: datetime

    def input_nodes(self) -> list[dict[str, Any]]:
        """The graph's input nodes as the run form needs them: key and type expression."""
        nodes = self.graph.get("nodes") if isinstance(self.graph, dict) else None
        return [
            {"node_key": n["node_key"], "type_expr": n.get("input_spec", {}).get("type_expr")}
            for n in nodes or []
            if isinstance(n, dict) and n.get("kind") == "input"
        ]


@dataclass(frozen=True)
class WorkflowView(OwnedView):
    id: str
    slug: str
    name: str
    latest_version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WorkflowDetailView:
    """A workflow with its latest version (GET /workflows/{slug})."""

    workflow: WorkflowView
    version: WorkflowVersionView
