"""The workflow graph document (contract section 5) as typed, immutable data.

Parsing never raises on a bad document: every structural problem (a node that is not an
object, a missing node_key, an unknown kind, a malformed binding, a repeated key) becomes a
report entry, so one save attempt shows the author everything at once. Broken nodes and
broken bindings are dropped from the parsed graph but remembered, so that later checks do
not report their consequences a second time (a port whose binding was malformed is not also
"unbound"; a reference to a malformed node is not also "unknown").

Input bindings are accepted in two forms: the contract's object keyed by port, and a list of
binding objects each naming its `port`. Only the list form can express a port bound twice
(a JSON object cannot repeat a key: a parser keeps one of the values silently), so "bound
twice" is reported for the list form only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from calcgraph.domain.workflows import retry as retry_rules
from calcgraph.domain.workflows.retry import RetryPolicy

NodeKind = Literal["input", "function", "extract"]
SourceKind = Literal["input_node", "edge", "chain"]
ExtractMode = Literal["pick", "filter"]

NODE_KINDS: tuple[str, ...] = get_args(NodeKind)
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
EXTRACT_MODES: tuple[str, ...] = get_args(ExtractMode)
INPUT_PORT = "value"
"""The one output port of an input node, and of a pick extract node."""
MAX_KEY_LENGTH = 200
"""node_key is a primary-key column of node_states: String(200)."""

Category = Literal[
    "invalid_input_node_types",
    "unknown_functions",
    "untyped_functions",
    "incompatible_edges",
    "unbound_ports",
    "cycles",
    "duplicate_node_keys",
    "invalid_nodes",
    "unknown_sources",
    "unknown_ports",
    "duplicate_bindings",
    "invalid_retry_policies",
]
CATEGORIES: tuple[str, ...] = get_args(Category)
Notice = Literal["deprecated_functions"]
"""Report entries that do not make a graph invalid (contract 11)."""
NOTICES: tuple[str, ...] = get_args(Notice)


@dataclass(frozen=True)
class Problem:
    """One entry of a validation report, filed under `category`."""

    category: Category | Notice
    node_key: str | None
    """None only when the problem is not attached to a node (the document, a keyless node)."""
    reason: str
    port: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node_key": self.node_key}
        if self.port is not None:
            out["port"] = self.port
        out.update(self.extra)
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Binding:
    port: str
    source: SourceKind
    from_port: str
    input_key: str | None = None
    """Set when source is input_node."""
    from_node_key: str | None = None
    """Set when source is edge or chain."""

    @property
    def upstream(self) -> str:
        """The node this binding reads from, whatever the source kind."""
        key = self.input_key if self.source == "input_node" else self.from_node_key
        assert key is not None
        return key

    def as_dict(self) -> dict[str, Any]:
        if self.source == "input_node":
            return {"source": self.source, "input_key": self.input_key, "from_port": self.from_port}
        return {
            "source": self.source,
            "from_node_key": self.from_node_key,
            "from_port": self.from_port,
        }


@dataclass(frozen=True)
class InputNode:
    node_key: str
    type_expr: object
    """As written (a string or an inline struct object); validation parses it."""
    kind: Literal["input"] = "input"


@dataclass(frozen=True)
class FunctionNode:
    node_key: str
    function: str
    """`<package>/<function>[@version]` or a function version id, as written."""
    bindings: tuple[Binding, ...] = ()
    broken_ports: frozenset[str] = frozenset()
    """Ports whose binding was malformed (already reported)."""
    kind: Literal["function"] = "function"
    retry: RetryPolicy | None = None
    """The node's retry policy (contract section 10); None: one attempt."""


@dataclass(frozen=True)
class ExtractNode:
    node_key: str
    mode: ExtractMode
    from_node_key: str
    pattern: str
    kind: Literal["extract"] = "extract"


Node = InputNode | FunctionNode | ExtractNode


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    """Document order, first occurrence of each key only."""
    problems: tuple[Problem, ...] = ()
    broken_keys: frozenset[str] = frozenset()
    """Keys of nodes that were present but malformed (already reported)."""

    def by_key(self) -> dict[str, Node]:
        return {node.node_key: node for node in self.nodes}

    def function_refs(self) -> list[str]:
        """Distinct function references in document order: what the caller must resolve."""
        return list(dict.fromkeys(n.function for n in self.nodes if isinstance(n, FunctionNode)))

    def function_nodes(self) -> Iterator[FunctionNode]:
        return (n for n in self.nodes if isinstance(n, FunctionNode))


class _Parser:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.broken: set[str] = set()

    def invalid(self, key: str | None, reason: str, port: str | None = None, **extra: Any) -> None:
        self.problems.append(Problem("invalid_nodes", key, reason, port, extra))

    def string(self, raw: Mapping[str, Any], name: str) -> str | None:
        value = raw.get(name)
        return value if isinstance(value, str) and value else None

    def node(self, index: int, raw: object) -> Node | None:
        if not isinstance(raw, Mapping):
            self.invalid(None, f"nodes[{index}] is not an object", index=index)
            return None
        key = raw.get("node_key")
        if not isinstance(key, str) or not key.strip():
            self.invalid(None, f"nodes[{index}] has no node_key (a non-empty string)", index=index)
            return None
        if len(key) > MAX_KEY_LENGTH:
            self.invalid(key[:40] + "…", f"node_key is longer than {MAX_KEY_LENGTH} characters")
            return None
        kind = raw.get("kind")
        parsed: Node | None
        if kind == "input":
            parsed = self.input_node(key, raw)
        elif kind == "function":
            parsed = self.function_node(key, raw)
        elif kind == "extract":
            parsed = self.extract_node(key, raw)
        else:
            self.invalid(key, f"kind {kind!r} is not one of {', '.join(NODE_KINDS)}")
            parsed = None
        if parsed is None:
            self.broken.add(key)
        return parsed

    def input_node(self, key: str, raw: Mapping[str, Any]) -> InputNode | None:
        spec = raw.get("input_spec")
        if not isinstance(spec, Mapping) or "type_expr" not in spec:
            self.invalid(key, "an input node needs input_spec.type_expr")
            return None
        return InputNode(key, spec["type_expr"])

    def function_node(self, key: str, raw: Mapping[str, Any]) -> FunctionNode | None:
        function = self.string(raw, "function")
        if function is None:
            self.invalid(key, "a function node needs `function`: <package>/<function>[@version]")
            return None
        items = self.binding_items(key, raw.get("input_bindings", {}))
        if items is None:
            return None
        bindings: list[Binding] = []
        broken: set[str] = set()
        seen: set[str] = set()
        for port, spec in items:
            if port in seen:
                self.problems.append(
                    Problem("duplicate_bindings", key, "port is bound more than once", port)
                )
                continue
            seen.add(port)
            binding = self.binding(key, port, spec)
            if binding is None:
                broken.add(port)
            else:
                bindings.append(binding)
        policy = None
        if raw.get("retry") is not None:
            policy, problems = retry_rules.parse(raw["retry"])
            for reason in problems:
                self.problems.append(Problem("invalid_retry_policies", key, reason))
        return FunctionNode(key, function, tuple(bindings), frozenset(broken), retry=policy)

    def binding_items(self, key: str, raw: object) -> list[tuple[str, object]] | None:
        if isinstance(raw, Mapping):
            return [(str(port), spec) for port, spec in raw.items()]
        if isinstance(raw, Sequence) and not isinstance(raw, str):
            items: list[tuple[str, object]] = []
            for index, spec in enumerate(raw):
                port = spec.get("port") if isinstance(spec, Mapping) else None
                if not isinstance(port, str) or not port:
                    self.invalid(key, f"input_bindings[{index}] does not name its `port`")
                    continue
                items.append((port, spec))
            return items
        self.invalid(key, "input_bindings is an object keyed by port (or a list of bindings)")
        return None

    def binding(self, key: str, port: str, raw: object) -> Binding | None:
        if not isinstance(raw, Mapping):
            self.invalid(key, "a binding is an object with `source`", port)
            return None
        source = raw.get("source")
        from_port = self.string(raw, "from_port")
        if source == "input_node":
            input_key = self.string(raw, "input_key")
            if input_key is None or from_port is None:
                self.invalid(key, "an input_node binding needs input_key and from_port", port)
                return None
            return Binding(port, "input_node", from_port, input_key=input_key)
        if source in ("edge", "chain"):
            from_key = self.string(raw, "from_node_key")
            if from_key is None or from_port is None:
                self.invalid(key, f"an {source} binding needs from_node_key and from_port", port)
                return None
            # Authors may write either; the planner decides which one the plan records.
            return Binding(port, "edge", from_port, from_node_key=from_key)
        self.invalid(key, f"source {source!r} is not one of {', '.join(SOURCE_KINDS)}", port)
        return None

    def extract_node(self, key: str, raw: Mapping[str, Any]) -> ExtractNode | None:
        mode, from_key, pattern = raw.get("mode"), raw.get("from_node_key"), raw.get("pattern")
        ok = True
        if mode not in EXTRACT_MODES:
            self.invalid(key, f"mode {mode!r} is not one of {', '.join(EXTRACT_MODES)}")
            ok = False
        if not isinstance(from_key, str) or not from_key:
            self.invalid(key, "an extract node needs from_node_key")
            ok = False
        if not isinstance(pattern, str) or not pattern:
            self.invalid(key, "an extract node needs a glob `pattern` (a non-empty string)")
            ok = False
        if not ok:
            return None
        assert isinstance(from_key, str)
        assert isinstance(pattern, str)
        return ExtractNode(key, "pick" if mode == "pick" else "filter", from_key, pattern)


def parse_graph(document: object) -> Graph:
    """Read a graph document `{"nodes": [...]}` (a bare list of nodes is accepted too)."""
    parser = _Parser()
    raw_nodes = document.get("nodes") if isinstance(document, Mapping) else document
    if not isinstance(raw_nodes, Sequence) or isinstance(raw_nodes, str | bytes):
        parser.invalid(None, "the graph is an object whose `nodes` is a list of node objects")
        return Graph((), tuple(parser.problems))
    nodes: dict[str, Node] = {}
    for index, raw in enumerate(raw_nodes):
        node = parser.node(index, raw)
        if node is None:
            continue
        if node.node_key in nodes:
            parser.problems.append(
                Problem(
                    "duplicate_node_keys",
                    node.node_key,
                    f"node_key is used more than once (again at nodes[{index}])",
                    extra={"index": index},
                )
            )
            continue
        nodes[node.node_key] = node
    return Graph(tuple(nodes.values()), tuple(parser.problems), frozenset(parser.broken))
