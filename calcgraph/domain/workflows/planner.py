"""The frozen execution plan of a workflow version: chains, waves, and per-node wiring.

A chain is a maximal path of function nodes where each link is the only consumer of the
previous node and the previous node is its only dependency (contract section 5). Extract
nodes are evaluated in-process, so they belong to no chain; they still count as consumers
and as dependencies, which means an extract node always ends the chain of its source and
starts a new one after it. That is deliberate: it keeps the invariant that only a chain's
head waits on anything outside the chain (interior nodes read run inputs and their
predecessor, nothing else), so a later worker can run a whole chain as one job given the
head's inputs, without coming back to the orchestrator between links.

Everything is ordered by a topological sort that breaks ties by node key, so the plan
depends on the graph only, not on the order of nodes in the document: chains are numbered
by the position of their head in that order, which is itself a topological order of chains.

The plan also carries, per node, its upstream (`depends_on`) and downstream (`consumers`)
function and extract nodes, so a tick is linear in nodes plus edges without rebuilding any
adjacency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from calcgraph.domain.workflows import dag
from calcgraph.domain.workflows.graph import (
    Binding,
    ExtractMode,
    ExtractNode,
    FunctionNode,
    Graph,
    InputNode,
)
from calcgraph.domain.workflows.retry import RetryPolicy
from calcgraph.domain.workflows.retry import from_dict as retry_from_dict

PLAN_FORMAT = 1


@dataclass(frozen=True)
class Chain:
    id: str
    node_keys: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "node_keys": list(self.node_keys)}


@dataclass(frozen=True)
class PlanNode:
    node_key: str
    kind: Literal["function", "extract"]
    depends_on: tuple[str, ...] = ()
    """Upstream function and extract nodes (input nodes never count), sorted."""
    consumers: tuple[str, ...] = ()
    """Downstream function and extract nodes, sorted."""
    chain: str | None = None
    function: str | None = None
    function_version_id: str | None = None
    bindings: tuple[Binding, ...] = ()
    """Sources rewritten to `chain` (same chain) or `edge` (another chain or an extract)."""
    mode: ExtractMode | None = None
    from_node_key: str | None = None
    pattern: str | None = None
    retry: RetryPolicy | None = None
    """The node's retry policy, frozen with the plan (contract section 10)."""

    @property
    def terminal(self) -> bool:
        """A function node no other node consumes: its outputs are the run's result."""
        return self.kind == "function" and not self.consumers

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node_key": self.node_key, "kind": self.kind}
        if self.kind == "function":
            out["chain"] = self.chain
            out["function"] = self.function
            if self.function_version_id is not None:
                out["function_version_id"] = self.function_version_id
            out["input_bindings"] = {b.port: b.as_dict() for b in self.bindings}
            out["terminal"] = self.terminal
            if self.retry is not None:
                out["retry"] = self.retry.as_dict()
        else:
            out.update(mode=self.mode, from_node_key=self.from_node_key, pattern=self.pattern)
        out["depends_on"] = list(self.depends_on)
        out["consumers"] = list(self.consumers)
        return out


@dataclass(frozen=True)
class Plan:
    chains: tuple[Chain, ...]
    waves: tuple[tuple[str, ...], ...]
    nodes: Mapping[str, PlanNode]
    """Every function and extract node, in topological order."""
    input_keys: tuple[str, ...] = ()
    terminal: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        terminal = tuple(key for key, node in self.nodes.items() if node.terminal)
        object.__setattr__(self, "terminal", terminal)

    def as_dict(self) -> dict[str, Any]:
        """The run's `plan_snapshot`."""
        return {
            "format": PLAN_FORMAT,
            "chains": [chain.as_dict() for chain in self.chains],
            "waves": [list(wave) for wave in self.waves],
            "nodes": [node.as_dict() for node in self.nodes.values()],
            "input_nodes": list(self.input_keys),
            "terminal_nodes": list(self.terminal),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Plan:
        """Read a stored `plan_snapshot` back; ValueError when it is not one."""
        try:
            if data.get("format") != PLAN_FORMAT:
                raise ValueError(f"unknown plan format {data.get('format')!r}")
            nodes = [_node_from_dict(raw) for raw in data["nodes"]]
            return Plan(
                chains=tuple(Chain(c["id"], tuple(c["node_keys"])) for c in data["chains"]),
                waves=tuple(tuple(wave) for wave in data["waves"]),
                nodes={node.node_key: node for node in nodes},
                input_keys=tuple(data.get("input_nodes", ())),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed plan snapshot: {exc!r}") from exc


def _node_from_dict(raw: Mapping[str, Any]) -> PlanNode:
    common = {
        "node_key": raw["node_key"],
        "depends_on": tuple(raw["depends_on"]),
        "consumers": tuple(raw["consumers"]),
    }
    if raw["kind"] == "extract":
        return PlanNode(
            kind="extract",
            mode=raw["mode"],
            from_node_key=raw["from_node_key"],
            pattern=raw["pattern"],
            **common,
        )
    if raw["kind"] != "function":
        raise ValueError(f"unknown node kind {raw['kind']!r}")
    bindings = tuple(
        Binding(
            port,
            spec["source"],
            spec["from_port"],
            input_key=spec.get("input_key"),
            from_node_key=spec.get("from_node_key"),
        )
        for port, spec in raw["input_bindings"].items()
    )
    return PlanNode(
        kind="function",
        chain=raw["chain"],
        function=raw["function"],
        function_version_id=raw.get("function_version_id"),
        bindings=bindings,
        retry=retry_from_dict(raw["retry"]) if raw.get("retry") else None,
        **common,
    )


def _dependencies(graph: Graph) -> dict[str, set[str]]:
    nodes = graph.by_key()
    deps: dict[str, set[str]] = {}
    for node in graph.nodes:
        if isinstance(node, InputNode):
            continue
        ups = (
            {node.from_node_key}
            if isinstance(node, ExtractNode)
            else {b.upstream for b in node.bindings if b.source != "input_node"}
        )
        for up in ups:
            if not isinstance(nodes.get(up), FunctionNode | ExtractNode):
                raise ValueError(f"node {node.node_key!r} reads {up!r}, which cannot feed it")
        deps[node.node_key] = ups
    return deps


def plan(graph: Graph, function_versions: Mapping[str, str] | None = None) -> Plan:
    """Plan a graph that passed validation; ValueError if it cannot be planned.

    `function_versions` maps function node keys to the function version ids they were
    resolved to when the workflow version was saved; they are frozen into the plan.
    """
    if graph.problems:
        raise ValueError(f"graph has problems: {graph.problems[0].reason}")
    nodes = graph.by_key()
    deps = _dependencies(graph)
    order = dag.topological_order(deps)
    if len(order) != len(deps):
        raise ValueError("graph has a cycle")
    consumers = dag.consumers_of(deps)

    def is_function(key: str) -> bool:
        return isinstance(nodes[key], FunctionNode)

    # A link p -> n: n reads only p, and only n reads p. Links are one-to-one, so chains are
    # paths and every function node lies on exactly one of them.
    previous: dict[str, str] = {}
    following: dict[str, str] = {}
    for key in order:
        if not is_function(key) or len(deps[key]) != 1:
            continue
        (up,) = deps[key]
        if is_function(up) and consumers[up] == [key]:
            previous[key], following[up] = up, key

    chains: list[Chain] = []
    chain_of: dict[str, str] = {}
    level: dict[str, int] = {}
    for key in order:
        node = nodes[key]
        if isinstance(node, ExtractNode):
            # Evaluated in the tick its source succeeds: it adds no wave of its own.
            level[key] = level[node.from_node_key]
            continue
        if key in previous:
            continue
        chain_id = f"chain-{len(chains)}"
        members = [key]
        while members[-1] in following:
            members.append(following[members[-1]])
        chains.append(Chain(chain_id, tuple(members)))
        head_level = max((level[up] + 1 for up in deps[key]), default=0)
        for member in members:
            chain_of[member] = chain_id
            level[member] = head_level

    waves: list[list[str]] = []
    for chain in chains:
        wave = level[chain.node_keys[0]]
        waves.extend([] for _ in range(wave + 1 - len(waves)))
        waves[wave].append(chain.id)

    planned: dict[str, PlanNode] = {}
    versions = function_versions or {}
    for key in order:
        node = nodes[key]
        base = PlanNode(
            key, "function", tuple(sorted(deps[key])), tuple(consumers[key]), chain_of.get(key)
        )
        if isinstance(node, ExtractNode):
            planned[key] = replace(
                base,
                kind="extract",
                mode=node.mode,
                from_node_key=node.from_node_key,
                pattern=node.pattern,
            )
            continue
        assert isinstance(node, FunctionNode)
        bindings = tuple(
            b
            if b.source == "input_node"
            else replace(b, source="chain" if chain_of.get(b.upstream) == base.chain else "edge")
            for b in node.bindings
        )
        planned[key] = replace(
            base,
            function=node.function,
            function_version_id=versions.get(key),
            bindings=bindings,
            retry=node.retry,
        )
    return Plan(
        chains=tuple(chains),
        waves=tuple(tuple(w) for w in waves),
        nodes=planned,
        input_keys=tuple(sorted(n.node_key for n in graph.nodes if isinstance(n, InputNode))),
    )
