"""Parsing the graph document: typed nodes out, structural problems as entries, never raised."""

from __future__ import annotations

import pytest

from calcgraph.domain.workflows.graph import (
    Binding,
    ExtractNode,
    FunctionNode,
    InputNode,
    parse_graph,
)
from tests.workflows.graphs import ex, fn, inp


def test_the_three_kinds() -> None:
    graph = parse_graph(
        {"nodes": [inp("x", "Length"), fn("a", "p/f", l="x"), ex("e", "pick", "a", "*")]}
    )
    assert graph.problems == ()
    x, a, e = graph.nodes
    assert x == InputNode("x", "Length")
    assert a == FunctionNode("a", "p/f", (Binding("l", "input_node", "value", input_key="x"),))
    assert e == ExtractNode("e", "pick", "a", "*")
    assert graph.function_refs() == ["p/f"]


def test_chain_sources_are_read_as_edges() -> None:
    node = fn("b", "p/f")
    node["input_bindings"] = {"v": {"source": "chain", "from_node_key": "a", "from_port": "out"}}
    (parsed,) = parse_graph({"nodes": [node]}).nodes
    assert isinstance(parsed, FunctionNode)
    assert parsed.bindings[0].source == "edge"


def test_list_form_bindings() -> None:
    node = fn("b", "p/f")
    node["input_bindings"] = [
        {"port": "v", "source": "input_node", "input_key": "x", "from_port": "value"},
        {"port": "v", "source": "input_node", "input_key": "y", "from_port": "value"},
        {"source": "input_node", "input_key": "y", "from_port": "value"},
    ]
    graph = parse_graph([inp("x"), inp("y"), node])
    assert [(p.category, p.port) for p in graph.problems] == [
        ("invalid_nodes", None),
        ("duplicate_bindings", "v"),
    ]
    assert isinstance(graph.nodes[2], FunctionNode)
    assert [b.input_key for b in graph.nodes[2].bindings] == ["x"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("nope", "not an object"),
        ({"kind": "input"}, "no node_key"),
        ({"node_key": "k" * 201, "kind": "input"}, "longer than 200"),
        ({"node_key": "a", "kind": "InputNode"}, "kind 'InputNode'"),
        ({"node_key": "a", "kind": "input"}, "input_spec.type_expr"),
        ({"node_key": "a", "kind": "function"}, "needs `function`"),
        (
            {"node_key": "a", "kind": "function", "function": "p/f", "input_bindings": 3},
            "keyed by port",
        ),
        (
            {
                "node_key": "a",
                "kind": "extract",
                "mode": "grab",
                "from_node_key": "b",
                "pattern": "*",
            },
            "mode 'grab'",
        ),
        ({"node_key": "a", "kind": "extract", "mode": "pick", "pattern": "*"}, "from_node_key"),
        ({"node_key": "a", "kind": "extract", "mode": "pick", "from_node_key": "b"}, "pattern"),
    ],
)
def test_structural_problems_become_entries(raw: object, reason: str) -> None:
    graph = parse_graph({"nodes": [raw]})
    assert graph.nodes == ()
    assert len(graph.problems) == 1
    assert graph.problems[0].category == "invalid_nodes"
    assert reason in graph.problems[0].reason


@pytest.mark.parametrize(
    "binding",
    [
        "x",
        {"source": "input_node", "input_key": "x"},
        {"source": "edge", "from_port": "out"},
        {"source": "wire", "from_node_key": "a", "from_port": "out"},
    ],
)
def test_a_bad_binding_is_remembered_as_broken(binding: object) -> None:
    node = fn("b", "p/f")
    node["input_bindings"] = {"v": binding}
    graph = parse_graph({"nodes": [node]})
    assert [(p.category, p.node_key, p.port) for p in graph.problems] == [
        ("invalid_nodes", "b", "v")
    ]
    assert isinstance(graph.nodes[0], FunctionNode)
    assert graph.nodes[0].broken_ports == frozenset({"v"})


def test_a_graph_that_is_not_a_list_of_nodes() -> None:
    for document in (None, {"nodes": {"a": 1}}, "nodes", {}):
        graph = parse_graph(document)
        assert [p.category for p in graph.problems] == ["invalid_nodes"]


def test_duplicate_keys_keep_the_first() -> None:
    graph = parse_graph({"nodes": [inp("a"), fn("a", "p/f")]})
    assert isinstance(graph.nodes[0], InputNode)
    assert [(p.category, p.extra) for p in graph.problems] == [
        ("duplicate_node_keys", {"index": 1})
    ]
