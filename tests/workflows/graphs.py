"""Small builders for graph documents, shared by the workflow and run tests."""

from __future__ import annotations

from typing import Any

from calcgraph.domain.types.expr import parse_type_expr
from calcgraph.domain.workflows.graph import parse_graph
from calcgraph.domain.workflows.planner import Plan, plan
from calcgraph.domain.workflows.validation import FunctionSignature, InputPort

Doc = dict[str, Any]


def inp(key: str, type_expr: object = "Float") -> Doc:
    return {"node_key": key, "kind": "input", "input_spec": {"type_expr": type_expr}}


def binding(source: str) -> Doc:
    """`"x"` reads input node x; `"A.out"` reads port out of node A."""
    if "." in source:
        node, port = source.split(".", 1)
        return {"source": "edge", "from_node_key": node, "from_port": port}
    return {"source": "input_node", "input_key": source, "from_port": "value"}


def fn(key: str, function: str = "pkg/f", **ports: str) -> Doc:
    return {
        "node_key": key,
        "kind": "function",
        "function": function,
        "input_bindings": {port: binding(src) for port, src in ports.items()},
    }


def ex(key: str, mode: str, source: str, pattern: str) -> Doc:
    return {
        "node_key": key,
        "kind": "extract",
        "mode": mode,
        "from_node_key": source,
        "pattern": pattern,
    }


def sig(
    inputs: dict[str, str], outputs: dict[str, str], optional: tuple[str, ...] = ()
) -> FunctionSignature:
    return FunctionSignature(
        typed=True,
        inputs={p: InputPort(parse_type_expr(t), p not in optional) for p, t in inputs.items()},
        outputs={p: parse_type_expr(t) for p, t in outputs.items()},
    )


def plan_of(*nodes: Doc) -> Plan:
    return plan(parse_graph({"nodes": list(nodes)}))
