"""A run's `planGraph` (issue 28): what a drawing of its graph needs of the frozen plan, read
once by the run page instead of the whole `planSnapshot` (the chains, waves, retry policies and
adjacency are the orchestrator's), the same whether read with the run or with a tick."""

from __future__ import annotations

import json

import pytest

from calcgraph.domain.runs.views import DRAWN_FIELDS, drawing
from calcgraph.domain.workflows.graph import Binding
from calcgraph.domain.workflows.planner import Chain, Plan, PlanNode
from calcgraph.domain.workflows.retry import RetryPolicy
from tests.execution.conftest import Platform
from tests.runs.test_graphql_api import _chain_run, _gql

PLAN = """query P($id: ID!) { workflowRun(id: $id) { planGraph planSnapshot } }"""
TICK_PLAN = """mutation T($id: ID!) { tickRun(id: $id) { planGraph } }"""


def _plan() -> Plan:
    nodes = {
        "a": PlanNode(
            "a",
            "function",
            consumers=("b", "pick"),
            chain="c0",
            function="pkg/f",
            function_version_id="fv-1",
            bindings=(Binding(port="x", source="input_node", input_key="x", from_port="value"),),
            retry=RetryPolicy(3),
        ),
        "b": PlanNode(
            "b",
            "function",
            depends_on=("a",),
            chain="c1",
            function="pkg/f",
            function_version_id="fv-1",
            bindings=(Binding(port="x", source="edge", from_node_key="a", from_port="y"),),
        ),
        "pick": PlanNode(
            "pick", "extract", depends_on=("a",), mode="pick", from_node_key="a", pattern="y/*"
        ),
    }
    return Plan(
        chains=(Chain("c0", ("a",)), Chain("c1", ("b",))),
        waves=(("a",), ("b", "pick")),
        nodes=nodes,
        input_keys=("x",),
    )


def test_a_drawing_keeps_what_the_graph_draws_and_nothing_else() -> None:
    snapshot = _plan().as_dict()
    drawn = drawing(snapshot)
    assert drawn == {
        "input_nodes": ["x"],
        "nodes": [
            {
                "node_key": "a",
                "kind": "function",
                "function": "pkg/f",
                "input_bindings": {
                    "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                },
            },
            {
                "node_key": "b",
                "kind": "function",
                "function": "pkg/f",
                "input_bindings": {"x": {"source": "edge", "from_node_key": "a", "from_port": "y"}},
            },
            {
                "node_key": "pick",
                "kind": "extract",
                "mode": "pick",
                "from_node_key": "a",
                "pattern": "y/*",
            },
        ],
    }
    assert all(set(n) <= set(DRAWN_FIELDS) for n in drawn["nodes"])
    assert len(json.dumps(drawn)) < len(json.dumps(snapshot)) / 2


@pytest.mark.parametrize("snapshot", [{}, {"nodes": None, "input_nodes": None}, {"nodes": []}])
def test_a_drawing_of_an_empty_or_partial_snapshot_is_empty(snapshot: dict[str, object]) -> None:
    assert drawing(snapshot) == {"input_nodes": [], "nodes": []}


@pytest.mark.db
async def test_plan_graph_is_the_snapshot_as_drawn_with_the_run_and_with_a_tick(
    platform: Platform,
) -> None:
    run_id = await _chain_run(platform, 3)
    run = (await _gql(platform, PLAN, id=run_id))["workflowRun"]
    assert run["planGraph"] == drawing(run["planSnapshot"])
    assert [n["node_key"] for n in run["planGraph"]["nodes"]] == ["n0", "n1", "n2"]
    assert run["planGraph"]["input_nodes"] == ["x"]
    ticked = (await _gql(platform, TICK_PLAN, id=run_id))["tickRun"]
    assert ticked["planGraph"] == run["planGraph"]


@pytest.mark.db
async def test_another_users_run_shows_no_plan_graph(platform: Platform) -> None:
    run_id = await _chain_run(platform, 2)
    response = await platform.client.post(
        "/graphql",
        json={"query": PLAN, "variables": {"id": run_id}},
        headers=platform.headers("bob"),
    )
    body = response.json()
    assert (body.get("data") or {}).get("workflowRun") is None
    assert body["errors"][0]["extensions"]["code"] == "PermissionDenied"
