"""Runs over GraphQL: the same services as REST; the nested run query's statement count does
not grow with the number of nodes (per-request DataLoaders)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from sqlalchemy import event

from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS, TERMINAL
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

RUN_QUERY = """
query Run($id: ID!) {
  workflowRun(id: $id) {
    id status revision terminalOutputs
    workflowVersion { id version inputNodes }
    nodeStates {
      nodeKey status attempt outputs startedAt finishedAt
      job { id status logs startedAt finishedAt cacheHit }
      functionVersion { id version handler }
    }
  }
}
"""
CREATE = """
mutation Create($slug: String!, $graph: JSON!) {
  createWorkflow(slug: $slug, name: $slug, graph: $graph) { slug latestVersion latest { id } }
}
"""
START = """
mutation Start($slug: String!, $inputs: JSON!) {
  createWorkflowRun(workflow: $slug, inputs: $inputs) { id status nodeStates { nodeKey status } }
}
"""
TICK = """
mutation Tick($id: ID!, $wait: Float!) {
  tickRun(id: $id, wait: $wait) { id status revision terminalOutputs nodeStates { nodeKey status } }
}
"""


async def _gql(platform: Platform, query: str, **variables: Any) -> dict[str, Any]:
    response = await platform.client.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers=platform.headers("alice"),
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def _chain_run(platform: Platform, length: int) -> str:
    """A chain of `length` inc nodes, created and driven to completion over GraphQL."""
    pkg = f"gql-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    nodes = [inp("x"), fn("n0", f"{pkg}/inc", x="x")]
    nodes += [fn(f"n{i}", f"{pkg}/inc", x=f"n{i - 1}.y") for i in range(1, length)]
    slug = f"chain-{uuid.uuid4().hex[:8]}"
    created = await _gql(platform, CREATE, slug=slug, graph={"nodes": nodes})
    assert created["createWorkflow"]["latestVersion"] == 1
    started = await _gql(platform, START, slug=slug, inputs={"x": 0})
    run = started["createWorkflowRun"]
    assert run["status"] == "pending"
    assert len(run["nodeStates"]) == length
    deadline = time.monotonic() + 60
    while run["status"] not in TERMINAL:
        assert time.monotonic() < deadline, run
        run = (await _gql(platform, TICK, id=run["id"], wait=5.0))["tickRun"]
    assert run["status"] == "completed"
    assert run["terminalOutputs"] == {f"n{length - 1}": {"y": float(length)}}
    return str(run["id"])


async def _count_statements(platform: Platform, run_id: str) -> tuple[int, dict[str, Any]]:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    engine = platform.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        data = await _gql(platform, RUN_QUERY, id=run_id)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(statements), data["workflowRun"]


async def test_run_query_statement_count_does_not_grow_with_nodes(platform: Platform) -> None:
    small = await _chain_run(platform, 2)
    large = await _chain_run(platform, 8)
    small_count, small_run = await _count_statements(platform, small)
    large_count, large_run = await _count_statements(platform, large)
    assert len(large_run["nodeStates"]) == 8
    for node in large_run["nodeStates"]:
        assert node["status"] == "success"
        assert node["job"]["status"] == "success"
        assert node["job"]["finishedAt"] is not None
        assert node["functionVersion"]["handler"] == "main:inc"
    assert large_run["workflowVersion"]["version"] == 1
    assert large_run["workflowVersion"]["inputNodes"] == [{"node_key": "x", "type_expr": "Float"}]
    assert small_run["nodeStates"][0]["job"]["id"]
    assert large_count == small_count, (small_count, large_count)
    # The run with its plan; its version; its node states (an ended run is not in the memo);
    # the jobs; the function versions: five reads (on SQLite each with its BEGIN), and the
    # token's user.
    assert large_count <= 11, (small_count, large_count)


async def test_runs_listing_and_hidden_run(platform: Platform) -> None:
    run_id = await _chain_run(platform, 1)
    listing = await _gql(
        platform,
        'query { workflowRuns(status: ["completed"]) { items { id nodeStates { nodeKey } } } }',
    )
    ids = [r["id"] for r in listing["workflowRuns"]["items"]]
    assert run_id in ids
    response = await platform.client.post(
        "/graphql",
        json={"query": RUN_QUERY, "variables": {"id": run_id}},
        headers=platform.headers("bob"),
    )
    errors = response.json()["errors"]
    assert errors[0]["extensions"]["code"] == "PermissionDenied"


async def test_node_relations_through_fragments(platform: Platform) -> None:
    run_id = await _chain_run(platform, 2)
    query = """
    fragment Node on NodeState { nodeKey job { status } ...Version }
    fragment Version on NodeState { functionVersion { handler } }
    query Run($id: ID!) { workflowRun(id: $id) { nodeStates { ...Node } } }
    """
    data = await _gql(platform, query, id=run_id)
    for node in data["workflowRun"]["nodeStates"]:
        assert node["job"] == {"status": "success"}
        assert node["functionVersion"] == {"handler": "main:inc"}
