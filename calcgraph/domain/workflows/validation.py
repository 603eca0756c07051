"""The validation report of a workflow graph: every problem at once, never only the first.

The caller resolves each function reference of the graph to a signature (or None when it
names nothing the caller may use) and passes them in; this module does no I/O.

Rules decided here where the contract is silent:
- Type of an extract node's output port: the candidate types of every bundle key its pattern
  can match (see `extract.py`). An edge from it is compatible only if *every* candidate is,
  because which key matches first is only known at run time. A pick whose pattern can match
  no key of a typed source is reported under `unknown_sources` (it would fail every run).
- A filter node outputs only keys its pattern matches: binding another key is an unknown
  source port. A matched key may still be absent at run time (filter results can be empty);
  that fails the consuming node then, not the deploy.
- Edges from an input node must use `source: input_node`, and extract nodes read function or
  extract nodes only: the specification passes input values verbatim, without projection.
- Problems that follow from an earlier one are not repeated: a port on an unknown or untyped
  function is not checked, nor is an edge whose source type is unknown.
- A node on a deprecated function version is listed under `deprecated_functions` (contract 11),
  a notice: it does not make the graph invalid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

from calcgraph.domain.types.compat import check
from calcgraph.domain.types.expr import TypeExpr, TypeExprError, from_json
from calcgraph.domain.workflows import dag
from calcgraph.domain.workflows.extract import Shape, filter_shape, pick_shape
from calcgraph.domain.workflows.graph import (
    CATEGORIES,
    INPUT_PORT,
    NOTICES,
    Binding,
    Category,
    ExtractNode,
    FunctionNode,
    Graph,
    InputNode,
    Node,
    Problem,
)


class InputPort(NamedTuple):
    type: TypeExpr
    required: bool = True


@dataclass(frozen=True)
class FunctionSignature:
    typed: bool
    inputs: Mapping[str, InputPort] = field(default_factory=dict)
    outputs: Mapping[str, TypeExpr] = field(default_factory=dict)
    deprecation: str | None = None
    """The deprecation warning of the version, when it is deprecated."""

    @staticmethod
    def from_schemas(
        inputs_schema: Mapping[str, Any] | None,
        outputs_schema: Mapping[str, Any] | None,
        typed: bool | None = None,
        deprecation: str | None = None,
    ) -> FunctionSignature:
        """From manifest schemas `{port: {"type": ..., "required": ...}}` (or `{port: type}`).

        Raises TypeExprError on a type that does not parse: stored schemas were checked when
        the function was deployed, so this is a defect, not a user error.
        """
        if typed is None:
            typed = inputs_schema is not None and outputs_schema is not None
        inputs = {
            port: InputPort(from_json(_type_of(spec)), _required(spec))
            for port, spec in (inputs_schema or {}).items()
        }
        outputs = {port: from_json(_type_of(spec)) for port, spec in (outputs_schema or {}).items()}
        return FunctionSignature(typed, inputs, outputs, deprecation)


def _type_of(spec: object) -> object:
    return spec.get("type") if isinstance(spec, Mapping) else spec


def _required(spec: object) -> bool:
    return not (isinstance(spec, Mapping) and spec.get("required") is False)


@dataclass(frozen=True)
class Report:
    problems: tuple[Problem, ...] = ()
    notices: tuple[Problem, ...] = ()
    """Entries that do not make the graph invalid (`deprecated_functions`)."""

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def has_untyped_functions(self) -> bool:
        """The contract refuses such a graph with 400 rather than 422."""
        return any(p.category == "untyped_functions" for p in self.problems)

    def entries(self, category: Category) -> list[Problem]:
        return [p for p in self.problems if p.category == category]

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        """Every category, empty ones included, so clients can index without checking."""
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in (*CATEGORIES, *NOTICES)}
        for problem in (*self.problems, *self.notices):
            out[problem.category].append(problem.as_dict())
        return out


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(k) for k in sorted(keys)[:10])
    return shown + (", …" if len(keys) > 10 else "") if keys else "none"


class _Validator:
    def __init__(self, graph: Graph, functions: Mapping[str, FunctionSignature | None]) -> None:
        self.graph = graph
        self.functions = functions
        self.nodes: dict[str, Node] = graph.by_key()
        self.problems: list[Problem] = list(graph.problems)
        self.notices: list[Problem] = []
        self.shapes: dict[str, Shape | None] = {}
        self.signatures: dict[str, FunctionSignature] = {}

    def add(
        self,
        category: Category,
        key: str | None,
        reason: str,
        port: str | None = None,
        **extra: Any,
    ) -> None:
        self.problems.append(Problem(category, key, reason, port, extra))

    def run(self) -> Report:
        for node in self.graph.nodes:
            if isinstance(node, InputNode):
                self.input_node(node)
            elif isinstance(node, FunctionNode):
                self.function_node(node)
        deps = {
            key: self.upstream(node)
            for key, node in self.nodes.items()
            if not isinstance(node, InputNode)
        }
        for path in dag.cycles(deps):
            self.add("cycles", path[0], " -> ".join(path) + " form a cycle", node_keys=path)
        for key in dag.topological_order(deps):
            node = self.nodes[key]
            if isinstance(node, ExtractNode):
                self.extract_node(node)
        for node in self.graph.function_nodes():
            self.ports(node)
        return Report(
            tuple(sorted(self.problems, key=lambda p: CATEGORIES.index(p.category))),
            tuple(self.notices),
        )

    def input_node(self, node: InputNode) -> None:
        try:
            expr = from_json(node.type_expr)
        except TypeExprError as exc:
            self.add(
                "invalid_input_node_types", node.node_key, exc.message, type_expr=node.type_expr
            )
            self.shapes[node.node_key] = None
            return
        self.shapes[node.node_key] = Shape.of({INPUT_PORT: [expr]})

    def function_node(self, node: FunctionNode) -> None:
        self.shapes[node.node_key] = None
        signature = self.functions.get(node.function)
        if signature is None:
            self.add(
                "unknown_functions",
                node.node_key,
                f"no function matches {node.function!r}",
                function=node.function,
            )
        elif not signature.typed:
            self.add(
                "untyped_functions",
                node.node_key,
                f"function {node.function!r} declares no typed inputs and outputs; "
                "only typed functions can be workflow nodes",
                function=node.function,
            )
        else:
            self.signatures[node.node_key] = signature
            self.shapes[node.node_key] = Shape.of({p: [t] for p, t in signature.outputs.items()})
        if signature is not None and signature.deprecation is not None:
            self.notices.append(
                Problem(
                    "deprecated_functions",
                    node.node_key,
                    signature.deprecation,
                    None,
                    {"function": node.function},
                )
            )

    def upstream(self, node: Node) -> set[str]:
        """Function and extract nodes this node reads from; reports references that cannot be."""
        if isinstance(node, ExtractNode):
            ok = self.reference(node.node_key, None, node.from_node_key, "edge")
            return {node.from_node_key} if ok else set()
        if isinstance(node, FunctionNode):
            refs = {
                b.upstream
                for b in node.bindings
                if self.reference(node.node_key, b.port, b.upstream, b.source)
            }
            return refs - {k for k in refs if isinstance(self.nodes[k], InputNode)}
        return set()

    def reference(self, key: str, port: str | None, target: str, source: str) -> bool:
        found = self.nodes.get(target)
        extra = {"input_key" if source == "input_node" else "from_node_key": target}
        if found is None:
            if target not in self.graph.broken_keys:
                self.add("unknown_sources", key, f"no node has node_key {target!r}", port, **extra)
            return False
        if source == "input_node" and not isinstance(found, InputNode):
            reason = f"{target!r} is a {found.kind} node, not an input node: bind it as an edge"
        elif source != "input_node" and isinstance(found, InputNode):
            reason = f"{target!r} is an input node: bind it with source input_node"
            if port is None:
                reason = (
                    f"{target!r} is an input node: extract nodes read function or extract nodes"
                )
        else:
            return True
        self.add("unknown_sources", key, reason, port, **extra)
        return False

    def extract_node(self, node: ExtractNode) -> None:
        source = self.shapes.get(node.from_node_key)
        if source is None:
            self.shapes[node.node_key] = None
            return
        if node.mode == "filter":
            self.shapes[node.node_key] = filter_shape(source, node.pattern)
            return
        shape = pick_shape(source, node.pattern)
        self.shapes[node.node_key] = shape
        if shape is None:
            self.add(
                "unknown_sources",
                node.node_key,
                f"pattern {node.pattern!r} matches no output key of {node.from_node_key!r} "
                f"(keys: {_names(list(source.keys))}): the pick would always fail",
                from_node_key=node.from_node_key,
                pattern=node.pattern,
            )

    def ports(self, node: FunctionNode) -> None:
        signature = self.signatures.get(node.node_key)
        if signature is None:
            return
        bound = {b.port for b in node.bindings} | node.broken_ports
        for port, spec in signature.inputs.items():
            if spec.required and port not in bound:
                self.add(
                    "unbound_ports",
                    node.node_key,
                    f"required input port of type {spec.type} has no binding",
                    port,
                )
        for binding in node.bindings:
            declared = signature.inputs.get(binding.port)
            if declared is None:
                self.add(
                    "unknown_ports",
                    node.node_key,
                    f"{node.function!r} has no input port {binding.port!r} "
                    f"(inputs: {_names(list(signature.inputs))})",
                    binding.port,
                )
                continue
            self.edge(node, binding, declared.type)

    def edge(self, node: FunctionNode, binding: Binding, target: TypeExpr) -> None:
        source_node = self.nodes.get(binding.upstream)
        if source_node is None or isinstance(source_node, InputNode) != (
            binding.source == "input_node"
        ):
            return  # already reported as an unknown source
        shape = self.shapes.get(binding.upstream)
        if shape is None:
            return
        where: dict[str, Any] = {
            "input_key" if binding.source == "input_node" else "from_node_key": binding.upstream,
            "from_port": binding.from_port,
        }
        candidates = shape.port_types(binding.from_port)
        if isinstance(source_node, ExtractNode) and source_node.mode == "filter":
            if not fnmatchcase(binding.from_port, source_node.pattern):
                candidates = None
        if candidates is None:
            self.add(
                "unknown_sources",
                node.node_key,
                f"{binding.upstream!r} has no output port {binding.from_port!r} "
                f"(ports: {_names(list(shape.ports))})",
                binding.port,
                **where,
            )
            return
        for candidate in candidates:
            verdict = check(candidate, target)
            if not verdict.allowed:
                self.add(
                    "incompatible_edges",
                    node.node_key,
                    verdict.reason,
                    binding.port,
                    **where,
                    source_type=str(candidate),
                    target_type=str(target),
                )
                return


def validate(graph: Graph, functions: Mapping[str, FunctionSignature | None]) -> Report:
    """Check a parsed graph against the signatures of the functions it references."""
    return _Validator(graph, functions).run()
