"""The planner: chains, waves and frozen wiring, by example and on random DAGs."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calcgraph.domain.workflows.graph import parse_graph
from calcgraph.domain.workflows.planner import Plan, plan
from tests.workflows.graphs import Doc, ex, fn, inp, plan_of


def chains(result: Plan) -> list[list[str]]:
    return [list(chain.node_keys) for chain in result.chains]


def waves(result: Plan) -> list[list[str]]:
    by_id = {chain.id: chain.node_keys for chain in result.chains}
    return [[key for chain_id in wave for key in by_id[chain_id]] for wave in result.waves]


def linear(count: int) -> list[Doc]:
    nodes = [inp("x"), fn("n000", a="x")]
    nodes += [fn(f"n{i:03}", a=f"n{i - 1:03}.out") for i in range(1, count)]
    return nodes


DIAMOND = [
    inp("x"),
    fn("A", a="x"),
    fn("B", a="A.out"),
    fn("C", a="A.out"),
    fn("D", b="B.out", c="C.out"),
]


class TestExamples:
    def test_a_linear_chain_of_forty_is_one_chain(self) -> None:
        result = plan_of(*linear(40))
        assert chains(result) == [[f"n{i:03}" for i in range(40)]]
        assert result.waves == (("chain-0",),)
        assert result.terminal == ("n039",)
        sources = [b.source for node in result.nodes.values() for b in node.bindings]
        assert sources == ["input_node"] + ["chain"] * 39

    def test_diamond(self) -> None:
        result = plan_of(*DIAMOND)
        assert chains(result) == [["A"], ["B"], ["C"], ["D"]]
        assert [list(w) for w in result.waves] == [["chain-0"], ["chain-1", "chain-2"], ["chain-3"]]
        assert result.nodes["D"].depends_on == ("B", "C")
        assert result.nodes["A"].consumers == ("B", "C")
        assert {b.source for b in result.nodes["D"].bindings} == {"edge"}
        assert result.terminal == ("D",)

    def test_fan_out_and_fan_in_break_chains(self) -> None:
        result = plan_of(
            inp("x"),
            fn("a", a="x"),
            fn("b", a="a.out"),
            fn("c", a="b.out"),
            fn("d", a="b.out"),
            fn("e", a="c.out", b="d.out"),
            fn("f", a="e.out"),
        )
        assert chains(result) == [["a", "b"], ["c"], ["d"], ["e", "f"]]
        assert waves(result) == [["a", "b"], ["c", "d"], ["e", "f"]]

    def test_input_nodes_are_no_dependency(self) -> None:
        result = plan_of(inp("x"), inp("y"), fn("a", a="x"), fn("b", a="a.out", k="y"))
        assert chains(result) == [["a", "b"]]
        assert result.nodes["b"].depends_on == ("a",)
        assert result.input_keys == ("x", "y")

    def test_extract_nodes_end_chains_and_add_no_wave(self) -> None:
        result = plan_of(
            inp("x"),
            fn("a", a="x"),
            fn("b", a="a.out"),
            ex("p", "pick", "b", "o*"),
            fn("c", a="p.value"),
            fn("d", a="c.out"),
        )
        assert chains(result) == [["a", "b"], ["c", "d"]]
        assert waves(result) == [["a", "b"], ["c", "d"]]
        assert result.nodes["p"].chain is None
        assert result.nodes["p"].depends_on == ("b",)
        assert result.nodes["c"].bindings[0].source == "edge"

    def test_a_dangling_extract_makes_its_source_non_terminal(self) -> None:
        result = plan_of(inp("x"), fn("a", a="x"), ex("p", "filter", "a", "*"))
        assert result.terminal == ()

    def test_independent_roots_share_the_first_wave(self) -> None:
        result = plan_of(inp("x"), fn("b", a="x"), fn("a", a="x"))
        assert chains(result) == [["a"], ["b"]]
        assert result.waves == (("chain-0", "chain-1"),)

    def test_function_version_ids_are_frozen_in(self) -> None:
        graph = parse_graph({"nodes": DIAMOND})
        result = plan(graph, {"A": "fv-1"})
        assert result.nodes["A"].function_version_id == "fv-1"
        assert result.as_dict()["nodes"][0]["function_version_id"] == "fv-1"

    def test_snapshot_round_trip(self) -> None:
        result = plan_of(*DIAMOND, ex("p", "pick", "D", "*"))
        snapshot = json.loads(json.dumps(result.as_dict()))
        assert snapshot["chains"][0] == {"id": "chain-0", "node_keys": ["A"]}
        assert Plan.from_dict(snapshot) == result

    def test_a_malformed_snapshot_is_refused(self) -> None:
        with pytest.raises(ValueError, match="malformed"):
            Plan.from_dict({"format": 1, "chains": []})

    @pytest.mark.parametrize(
        "nodes",
        [
            [fn("a", a="b.out"), fn("b", a="a.out")],
            [fn("a", a="ghost.out")],
            [inp("x"), inp("x")],
        ],
    )
    def test_an_invalid_graph_cannot_be_planned(self, nodes: list[Doc]) -> None:
        with pytest.raises(ValueError, match="cycle|cannot feed|problems"):
            plan_of(*nodes)


@st.composite
def random_dags(draw: st.DrawFn) -> list[Doc]:
    count = draw(st.integers(min_value=1, max_value=25))
    nodes: list[Doc] = [inp("x")]
    kinds: list[str] = []
    for index in range(count):
        key = f"k{index:02}"
        upstream = list(range(index))
        if index and draw(st.integers(0, 5)) == 0:
            source = draw(st.sampled_from(upstream))
            nodes.append(ex(key, draw(st.sampled_from(["pick", "filter"])), f"k{source:02}", "*"))
            kinds.append("extract")
            continue
        picked = draw(st.sets(st.sampled_from(upstream), max_size=3)) if upstream else set()
        ports = {f"p{u}": f"k{u:02}.out" for u in sorted(picked)} or {"p": "x"}
        nodes.append(fn(key, **ports))
        kinds.append("function")
    return nodes


def function_source(result: Plan, key: str) -> str:
    """The function node an extract (or chain of extracts) ultimately reads."""
    node = result.nodes[key]
    while node.kind == "extract":
        assert node.from_node_key is not None
        node = result.nodes[node.from_node_key]
    return node.node_key


class TestRandomDags:
    @settings(max_examples=120, deadline=None)
    @given(random_dags())
    def test_plan_properties(self, nodes: list[Doc]) -> None:
        result = plan_of(*nodes)
        functions = [k for k, n in result.nodes.items() if n.kind == "function"]
        members = [key for chain in result.chains for key in chain.node_keys]
        # Every function node is in exactly one chain.
        assert sorted(members) == sorted(functions)
        chain_of = {key: c.id for c in result.chains for key in c.node_keys}
        number = {c.id: i for i, c in enumerate(result.chains)}
        wave_of = {cid: i for i, wave in enumerate(result.waves) for cid in wave}
        assert sorted(wave_of) == sorted(number)
        assert all(result.waves)
        for chain in result.chains:
            assert chain.id == f"chain-{number[chain.id]}"
            for prev, nxt in zip(chain.node_keys, chain.node_keys[1:], strict=False):
                assert result.nodes[nxt].depends_on == (prev,)
                assert result.nodes[prev].consumers == (nxt,)
        for key in functions:
            for up in result.nodes[key].depends_on:
                source = function_source(result, up)
                if chain_of[source] == chain_of[key]:
                    continue
                # Waves and chain numbers both respect dependencies.
                assert wave_of[chain_of[source]] < wave_of[chain_of[key]]
                assert number[chain_of[source]] < number[chain_of[key]]
        # Maximality: no chain could be extended by a link across its ends.
        heads = {c.node_keys[0] for c in result.chains}
        for head in heads:
            deps = result.nodes[head].depends_on
            if len(deps) == 1 and result.nodes[deps[0]].kind == "function":
                assert result.nodes[deps[0]].consumers != (head,)
        for key in functions:
            node = result.nodes[key]
            assert node.terminal == (not node.consumers)

    @settings(max_examples=60, deadline=None)
    @given(random_dags(), st.randoms(use_true_random=False))
    def test_plan_is_deterministic(self, nodes: list[Doc], rng: random.Random) -> None:
        first = plan_of(*nodes)
        shuffled: list[Any] = list(nodes)
        rng.shuffle(shuffled)
        assert plan_of(*nodes).as_dict() == first.as_dict()
        assert plan_of(*shuffled).as_dict() == first.as_dict()
        assert Plan.from_dict(json.loads(json.dumps(first.as_dict()))) == first
