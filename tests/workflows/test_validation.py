"""The validation report: every kind of problem in one graph, then each rule on its own."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from calcgraph.domain.workflows.graph import CATEGORIES, NOTICES, parse_graph
from calcgraph.domain.workflows.validation import FunctionSignature, Report, validate
from tests.workflows.graphs import Doc, ex, fn, inp, sig

FUNCTIONS: dict[str, FunctionSignature | None] = {
    "demo-beam/cantilever": sig(
        {"length": "Length", "force": "Force"},
        {"deflection": "Length", "moment": "Moment", "reactions": "{left: Force, right: Force}"},
    ),
    "demo-beam/stress_check@1.2.0": sig({"moment": "Moment"}, {"utilisation": "Float"}),
    "pkg/force": sig({"force": "Force"}, {"out": "Force"}),
    "pkg/opt": sig({"a": "Float", "scale": "Float"}, {"out": "Float"}, optional=("scale",)),
    "pkg/dict": sig({}, {"loads": "dict[str, Force]"}),
    "pkg/untyped": FunctionSignature(typed=False),
    "pkg/missing": None,
}


def report_of(*nodes: Doc, functions: Mapping[str, FunctionSignature | None] = FUNCTIONS) -> Report:
    return validate(parse_graph({"nodes": list(nodes)}), functions)


def located(report: Report, category: Any) -> set[tuple[str | None, str | None]]:
    return {(p.node_key, p.port) for p in report.entries(category)}


CONTRACT_EXAMPLE: list[Doc] = [
    inp("span", "Length"),
    inp("load", "Force"),
    fn("beam", "demo-beam/cantilever", length="span", force="load"),
    fn("check", "demo-beam/stress_check@1.2.0", moment="beam.moment"),
    ex("pick_m", "pick", "beam", "mom*"),
]


def test_the_contract_example_is_valid() -> None:
    report = report_of(*CONTRACT_EXAMPLE)
    assert report.valid
    assert report.as_dict() == {name: [] for name in (*CATEGORIES, *NOTICES)}


class TestEveryProblemInOneReport:
    @pytest.fixture
    def report(self) -> Report:
        nodes: list[Any] = [
            inp("span", "Length"),
            inp("typo", "Lenght"),
            inp("broken", "list[Force"),
            fn("ghost_fn", "pkg/missing", force="span"),
            fn("raw", "pkg/untyped", x="span"),
            fn("mismatch", "pkg/force", force="span"),
            fn("unbound", "demo-beam/cantilever", length="span"),
            fn("p", "pkg/force", force="q.out"),
            fn("q", "pkg/force", force="p.out"),
            fn("dup", "pkg/force", force="p.out"),
            fn("dup", "pkg/force", force="p.out"),
            {"kind": "function", "function": "pkg/force"},
            {"node_key": "odd", "kind": "weird"},
            {
                "node_key": "bad_binding",
                "kind": "function",
                "function": "pkg/force",
                "input_bindings": {"force": {"source": "teleport"}},
            },
            fn("orphan", "pkg/force", force="nowhere.out"),
            fn("extra", "pkg/opt", a="span", nope="span"),
            {
                "node_key": "twice",
                "kind": "function",
                "function": "pkg/force",
                "input_bindings": [
                    {"port": "force", "source": "edge", "from_node_key": "p", "from_port": "out"},
                    {"port": "force", "source": "edge", "from_node_key": "q", "from_port": "out"},
                ],
            },
            fn("wrong_port", "pkg/force", force="p.nothing"),
            {**fn("retries", "pkg/force", force="p.out"), "retry": {"max_attempts": 0}},
        ]
        return report_of(*nodes)

    def test_every_category_has_its_problem(self, report: Report) -> None:
        assert not report.valid
        assert {name for name in CATEGORIES if report.entries(name)} == set(CATEGORIES)  # type: ignore[arg-type]

    def test_invalid_retry_policies(self, report: Report) -> None:
        assert located(report, "invalid_retry_policies") == {("retries", None)}

    def test_invalid_input_node_types(self, report: Report) -> None:
        assert located(report, "invalid_input_node_types") == {("typo", None), ("broken", None)}
        typo = report.entries("invalid_input_node_types")[0]
        assert "did you mean 'Length'" in typo.reason

    def test_functions(self, report: Report) -> None:
        assert located(report, "unknown_functions") == {("ghost_fn", None)}
        assert located(report, "untyped_functions") == {("raw", None)}
        assert report.has_untyped_functions

    def test_incompatible_edges(self, report: Report) -> None:
        assert located(report, "incompatible_edges") == {("mismatch", "force")}
        entry = report.entries("incompatible_edges")[0].as_dict()
        assert entry["input_key"] == "span"
        assert entry["source_type"] == "Length"
        assert entry["target_type"] == "Force"
        assert "Length and Force" in entry["reason"]

    def test_ports(self, report: Report) -> None:
        assert located(report, "unbound_ports") == {("unbound", "force")}
        assert located(report, "unknown_ports") == {("extra", "nope")}
        assert located(report, "duplicate_bindings") == {("twice", "force")}

    def test_structure(self, report: Report) -> None:
        assert located(report, "cycles") == {("p", None)}
        assert report.entries("cycles")[0].extra["node_keys"] == ["p", "q", "p"]
        assert located(report, "duplicate_node_keys") == {("dup", None)}
        assert located(report, "invalid_nodes") == {
            (None, None),
            ("odd", None),
            ("bad_binding", "force"),
        }
        assert located(report, "unknown_sources") == {
            ("orphan", "force"),
            ("wrong_port", "force"),
        }

    def test_consequences_are_not_repeated(self, report: Report) -> None:
        # A malformed binding is not also unbound; an unknown function's ports are not checked.
        assert ("bad_binding", "force") not in located(report, "unbound_ports")
        assert all(p.node_key not in {"ghost_fn", "raw"} for p in report.entries("unknown_ports"))

    def test_the_report_is_json(self, report: Report) -> None:
        data = json.loads(json.dumps(report.as_dict()))
        assert set(data) == {*CATEGORIES, *NOTICES}
        for entries in data.values():
            for entry in entries:
                assert "node_key" in entry
                assert isinstance(entry["reason"], str)
                assert entry["reason"]


class TestRules:
    def test_input_node_type_feeds_a_port_through_the_type_rule(self) -> None:
        assert report_of(inp("f", "Float"), fn("a", "pkg/force", force="f")).valid
        assert report_of(inp("n", "Numeric"), fn("a", "pkg/force", force="n")).valid
        report = report_of(inp("s", "String"), fn("a", "pkg/force", force="s"))
        assert located(report, "incompatible_edges") == {("a", "force")}

    def test_inline_struct_input_type(self) -> None:
        report = report_of(inp("s", {"a": "Force"}), fn("a", "pkg/force", force="s"))
        assert located(report, "incompatible_edges") == {("a", "force")}
        assert report.entries("invalid_input_node_types") == []

    def test_optional_port_may_stay_unbound(self) -> None:
        assert report_of(inp("x"), fn("a", "pkg/opt", a="x")).valid
        assert located(report_of(inp("x"), fn("a", "pkg/opt", scale="x")), "unbound_ports") == {
            ("a", "a")
        }

    def test_edge_from_an_input_node_must_say_input_node(self) -> None:
        node = fn("a", "pkg/force")
        node["input_bindings"] = {
            "force": {"source": "edge", "from_node_key": "f", "from_port": "value"}
        }
        report = report_of(inp("f", "Force"), node)
        assert located(report, "unknown_sources") == {("a", "force")}
        assert "input_node" in report.entries("unknown_sources")[0].reason

    def test_input_node_binding_to_a_function_node(self) -> None:
        report = report_of(
            inp("f", "Force"), fn("a", "pkg/force", force="f"), fn("b", "pkg/force", force="a")
        )
        assert located(report, "unknown_sources") == {("b", "force")}

    def test_self_loop_is_a_cycle(self) -> None:
        report = report_of(fn("a", "pkg/force", force="a.out"))
        assert report.entries("cycles")[0].extra["node_keys"] == ["a", "a"]

    def test_not_a_graph(self) -> None:
        report = validate(parse_graph({"nodes": "nope"}), FUNCTIONS)
        assert located(report, "invalid_nodes") == {(None, None)}


class TestExtractTypes:
    def test_pick_takes_the_matched_port_type(self) -> None:
        nodes = [
            *CONTRACT_EXAMPLE,
            fn("use", "demo-beam/stress_check@1.2.0", moment="pick_m.value"),
        ]
        assert report_of(*nodes).valid
        wrong = [*CONTRACT_EXAMPLE, fn("use", "pkg/force", force="pick_m.value")]
        assert located(report_of(*wrong), "incompatible_edges") == {("use", "force")}

    def test_pick_with_several_candidates_must_fit_all(self) -> None:
        # "*e*" matches deflection (Length) and reactions/... (Force): one of them is refused.
        nodes = [
            *CONTRACT_EXAMPLE[:3],
            ex("p", "pick", "beam", "reactions*"),
            fn("use", "pkg/force", force="p.value"),
        ]
        report = report_of(*nodes)
        # reactions itself is a struct: refused against Force even though its fields fit.
        assert located(report, "incompatible_edges") == {("use", "force")}
        fields_only = [*nodes[:3], ex("p", "pick", "beam", "reactions/*"), nodes[4]]
        assert report_of(*fields_only).valid

    def test_pick_that_never_matches_is_reported(self) -> None:
        report = report_of(*CONTRACT_EXAMPLE[:3], ex("p", "pick", "beam", "torque*"))
        assert located(report, "unknown_sources") == {("p", None)}

    def test_pick_into_a_dict_output_is_checked_at_run_time_types(self) -> None:
        nodes = [
            fn("d", "pkg/dict"),
            ex("p", "pick", "d", "loads/*"),
            fn("use", "pkg/force", force="p.value"),
        ]
        assert report_of(*nodes).valid
        nodes[1] = ex("p", "pick", "d", "other/*")
        assert located(report_of(*nodes), "unknown_sources") == {("p", None)}

    def test_filter_outputs_matched_keys(self) -> None:
        base = [*CONTRACT_EXAMPLE[:3], ex("f", "filter", "beam", "reactions/*")]
        assert report_of(*base, fn("use", "pkg/force", force="f.reactions/left")).valid
        unmatched = report_of(*base, fn("use", "pkg/force", force="f.moment"))
        assert located(unmatched, "unknown_sources") == {("use", "force")}

    def test_filter_into_a_dict_output(self) -> None:
        base = [fn("d", "pkg/dict"), ex("f", "filter", "d", "loads/*")]
        assert report_of(*base, fn("use", "pkg/force", force="f.loads/left")).valid
        assert not report_of(*base, fn("use", "pkg/force", force="f.other")).valid

    def test_extract_of_an_untyped_source_is_not_checked(self) -> None:
        nodes = [
            fn("u", "pkg/untyped"),
            ex("p", "pick", "u", "x"),
            fn("use", "pkg/force", force="p.value"),
        ]
        report = report_of(*nodes)
        assert [p.category for p in report.problems] == ["untyped_functions"]


class TestSignatures:
    def test_from_manifest_schemas(self) -> None:
        signature = FunctionSignature.from_schemas(
            {
                "length": {"type": "Length", "required": True},
                "k": {"type": "Float", "required": False},
            },
            {"moment": {"type": "Moment"}},
        )
        assert signature.typed
        assert signature.inputs["k"].required is False
        assert str(signature.outputs["moment"]) == "Moment"

    def test_missing_schemas_mean_untyped(self) -> None:
        assert not FunctionSignature.from_schemas(None, None).typed
