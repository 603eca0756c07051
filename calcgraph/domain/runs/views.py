"""Read models of workflow runs. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from calcgraph.domain import answers
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
    """A listing left the terminal outputs out (over 64 KiB), or a run's answer did (they
    would pass its bound; contract 8b)."""
    size_hint: int = 0
    """The answer's bytes as `shown` counted them (a large one is written off the loop)."""
    encoded: dict[str, bytes] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """A door's serialisation of this very view, by the door's name, kept with it: the
    answer a tick that changed nothing kept (`calcgraph.domain.runs.memo`) is this same
    object at every tick until the run changes, so it is written once, not at every tick.
    Not copied by `replace`: a view made from it is another answer."""

    def sort_key(self) -> tuple[str, str]:
        return (self.started_at.isoformat(), self.id)

    def function_versions(self) -> dict[str, str]:
        """node_key -> function version id of every function node, from the frozen plan."""
        return function_versions(self.plan_snapshot)


Document = dict[str, Any]
"""A JSON object as a JSON column of a row reads it."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """The run's row as a tick reads it: every column of `workflow_runs` but its large plan
    (`plan_snapshot`) and the sizes, under the same names and in the table's order, as Core
    columns (no ORM entity, identity map or per-row loading on the tick's path), then whether
    its terminal outputs were held. A tick's write replaces it (`dataclasses.replace`) with
    the fields it wrote."""

    workflow_id: str
    workflow_version_id: str
    user_id: str
    """The run's owner: its jobs run on their behalf."""
    status: str
    inputs: Document
    resolved_inputs: Document
    """The inputs in SI, as the tick binds them to its nodes."""
    terminal_outputs: Document | None
    error_message: str | None
    first_failed_node_key: str | None
    revision: int
    started_at: datetime
    completed_at: datetime | None
    retry_at: datetime | None
    rerun_of: str | None
    cache_refresh: bool
    id: str
    terminal_outputs_held: bool = False
    """Not a column: the terminal outputs were over the answer bound as stored, so the read
    left them in the database (`terminal_outputs` None) rather than decode what no answer
    shows; a tick that advances the run reads them first (`RunStore.complete`)."""


STORED_FIELDS = (
    "id",
    "workflow_id",
    "workflow_version_id",
    "user_id",
    "status",
    "inputs",
    "terminal_outputs",
    "error_message",
    "first_failed_node_key",
    "plan_snapshot",
    "revision",
    "started_at",
    "completed_at",
    "rerun_of",
    "retry_at",
)
"""The fields of a `RunView` that its run's row (`workflow_runs`) holds under the same names."""


def function_versions(plan_snapshot: Mapping[str, Any]) -> dict[str, str]:
    """node_key -> function version id of every function node of a frozen plan."""
    return {
        node["node_key"]: node["function_version_id"]
        for node in plan_snapshot.get("nodes", ())
        if node.get("kind") == "function" and node.get("function_version_id")
    }


DRAWN_FIELDS = (
    "node_key",
    "kind",
    "function",
    "input_bindings",
    "mode",
    "from_node_key",
    "pattern",
)
"""What a drawing of a plan keeps of each node: its key and kind, a function node's function and
bindings, an extract node's mode, source and pattern."""


def drawing(plan_snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """What a drawing of a run's graph needs of its frozen plan: the `input_nodes` and the
    `nodes`, each with DRAWN_FIELDS only. The chains, waves, retry policies, function version
    ids and adjacency (`depends_on`, `consumers`) are the orchestrator's, most of the snapshot."""
    return {
        "input_nodes": list(plan_snapshot.get("input_nodes") or ()),
        "nodes": [
            {k: node[k] for k in DRAWN_FIELDS if k in node}
            for node in plan_snapshot.get("nodes") or ()
        ],
    }


@dataclass(frozen=True)
class NodeRow:
    """A node state with its run and key, as GraphQL lists them."""

    run_id: str
    node_key: str
    kind: str
    state: NodeState


@dataclass(frozen=True)
class ShownNodeState(NodeState):
    """A node state as an answer shows it: its outputs left out when over 64 KiB or past the
    answer's bound (contract 8b), read whole through the node's job (`GET /jobs/{id}`)."""

    outputs_omitted: bool = False


def left_out(state: NodeState) -> ShownNodeState:
    """`state` as an answer shows it with its outputs left out."""
    return ShownNodeState(**{**vars(state), "outputs": None, "outputs_omitted": True})


def shown(view: RunView, budget: answers.Budget | None = None) -> RunView:
    """The run as one answer shows it, within the answer bound (contract 8b): the terminal
    outputs whole when they fit (else left out: each is its node's job's outputs), then each
    node's outputs in node key order while they are at most 64 KiB and still fit; the others
    left out (`outputs_omitted`). Pure; the view's own states are not changed (a tick's
    callers, a re-run, read them whole)."""
    states = view.node_states or {}
    if budget is None:
        budget = answers.Budget()
        budget.spend(
            answers.NODE_OVERHEAD_BYTES * (len(states) + 1) + answers.value_size(view.inputs)
        )
        for state in states.values():
            if state.error is not None or state.attempts:
                budget.spend(answers.value_size(state.error) + answers.value_size(state.attempts))
        start = answers.ANSWER_MAX_BYTES
    else:
        start = budget.left
    terminal, terminal_omitted = view.terminal_outputs, view.terminal_outputs_omitted
    if not budget.take(terminal, cap=answers.ANSWER_MAX_BYTES):
        terminal, terminal_omitted = None, True
    listed: dict[str, NodeState] = {}
    for key, state in states.items():
        if budget.take(state.outputs):
            listed[key] = state
        else:
            listed[key] = left_out(state)
    return replace(
        view,
        node_states=listed if view.node_states is not None else None,
        terminal_outputs=terminal,
        terminal_outputs_omitted=terminal_omitted,
        size_hint=start - budget.left,
    )
