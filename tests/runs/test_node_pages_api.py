"""A run's node states a page at a time over GraphQL (`nodeStates(first, after, status)`,
`nodeState(key)`): the same nodes as the whole list, in key order, from the database or from a
tick's answer, with one statement for the pages of many runs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import event

from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_graphql_api import CREATE, START, _chain_run, _gql
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

PAGE = """
query Page($id: ID!, $first: Int, $after: String, $status: [String!]) {
  workflowRun(id: $id) {
    nodeStates(first: $first, after: $after, status: $status) {
      nodeKey status job { status } functionVersion { handler }
    }
  }
}
"""
TICK_PAGE = """
mutation Tick($id: ID!, $first: Int, $after: String) {
  tickRun(id: $id) { nodeStates(first: $first, after: $after) { nodeKey status } }
}
"""
NODE = """
query Node($id: ID!, $key: String!) {
  workflowRun(id: $id) { nodeState(key: $key) { nodeKey status outputs job { status } } }
}
"""


async def _pending_run(platform: Platform, length: int) -> str:
    """A run of a chain of `length` nodes, created and never ticked: every node pending."""
    pkg = f"page-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    nodes = [inp("x"), fn("n0", f"{pkg}/inc", x="x")]
    nodes += [fn(f"n{i}", f"{pkg}/inc", x=f"n{i - 1}.y") for i in range(1, length)]
    slug = f"pending-{uuid.uuid4().hex[:8]}"
    await _gql(platform, CREATE, slug=slug, graph={"nodes": nodes})
    return str((await _gql(platform, START, slug=slug, inputs={"x": 0}))["createWorkflowRun"]["id"])


async def _walk(platform: Platform, query: str, field: str, run_id: str, first: int) -> list[Any]:
    seen: list[Any] = []
    after = None
    while True:
        data = await _gql(platform, query, id=run_id, first=first, after=after)
        page = data[field]["nodeStates"]
        seen += page
        if len(page) < first:
            return seen
        after = page[-1]["nodeKey"]


async def test_pages_walk_the_whole_run_in_key_order(platform: Platform) -> None:
    run_id = await _chain_run(platform, 12)
    whole = (await _gql(platform, PAGE, id=run_id))["workflowRun"]["nodeStates"]
    keys = [n["nodeKey"] for n in whole]
    assert keys == sorted(f"n{i}" for i in range(12))  # n0, n1, n10, n11, n2, ...
    paged = await _walk(platform, PAGE, "workflowRun", run_id, 5)
    assert paged == whole
    assert all(n["job"] == {"status": "success"} for n in paged)
    assert all(n["functionVersion"] == {"handler": "main:inc"} for n in paged)
    # A tick's answer holds the states already: it pages them the same way.
    ticked = await _walk(platform, TICK_PAGE, "tickRun", run_id, 5)
    assert [n["nodeKey"] for n in ticked] == keys


async def test_status_filter_keeps_only_those_statuses(platform: Platform) -> None:
    done = await _chain_run(platform, 3)
    waiting = await _pending_run(platform, 3)
    for run_id, status in ((done, "success"), (waiting, "pending")):
        page = (await _gql(platform, PAGE, id=run_id, status=[status]))["workflowRun"]
        assert [n["nodeKey"] for n in page["nodeStates"]] == ["n0", "n1", "n2"]
        other = "pending" if status == "success" else "success"
        page = (await _gql(platform, PAGE, id=run_id, status=[other], first=2))["workflowRun"]
        assert page["nodeStates"] == []
    page = await _gql(platform, PAGE, id=done, status=["success"], first=1, after="n0")
    assert [n["nodeKey"] for n in page["workflowRun"]["nodeStates"]] == ["n1"]


async def test_node_state_by_key(platform: Platform) -> None:
    run_id = await _chain_run(platform, 3)
    node = (await _gql(platform, NODE, id=run_id, key="n1"))["workflowRun"]["nodeState"]
    assert node == {
        "nodeKey": "n1",
        "status": "success",
        "outputs": {"y": 2.0},
        "job": {"status": "success"},
    }
    missing = await _gql(platform, NODE, id=run_id, key="x")  # the input node has no state
    assert missing["workflowRun"]["nodeState"] is None


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"first": 0}, "first must be 1 to 10,000"),
        ({"first": 10_001}, "first must be 1 to 10,000"),
        ({"status": ["done"]}, "unknown node status 'done'"),
    ],
)
async def test_page_arguments_out_of_range_are_refused(
    platform: Platform, variables: dict[str, Any], message: str
) -> None:
    run_id = await _pending_run(platform, 2)
    response = await platform.client.post(
        "/graphql",
        json={"query": PAGE, "variables": {"id": run_id, **variables}},
        headers=platform.headers("alice"),
    )
    assert response.status_code == 200
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "ValidationError"
    assert error["message"] == f"ValidationError: {message}"


async def _statements(platform: Platform, query: str) -> tuple[int, dict[str, Any]]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(str(args[2]))

    engine = platform.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        data = await _gql(platform, query)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen), data


async def test_pages_of_many_runs_take_one_statement(platform: Platform) -> None:
    """A listing of runs asking each run's first page: the statements do not grow with the
    number of runs (one batch for the pages, one per relation)."""
    query = """query { workflowRuns(status: ["pending"], limit: %d) { items {
      id nodeStates(first: 2) { nodeKey status job { status } } } } }"""
    await _pending_run(platform, 3)
    one, data = await _statements(platform, query % 1)
    for _ in range(3):
        await _pending_run(platform, 3)
    four, data = await _statements(platform, query % 4)
    items = data["workflowRuns"]["items"]
    assert len(items) == 4
    for run in items:
        assert run["nodeStates"] == [
            {"nodeKey": "n0", "status": "pending", "job": None},
            {"nodeKey": "n1", "status": "pending", "job": None},
        ]
    assert four == one, (one, four)


VERSIONS = """
query Versions($id: ID!) {
  workflowRun(id: $id) {
    functionVersions { id handler function { name } }
    nodeStates { nodeKey functionVersionId }
  }
}
"""


async def test_function_versions_are_listed_once_for_the_whole_run(platform: Platform) -> None:
    # Three nodes running the same function version: the run lists that version once, and
    # every node names it by `functionVersionId` (a 1,000-node page reads it once, not 1,000x).
    run_id = await _pending_run(platform, 3)
    run = (await _gql(platform, VERSIONS, id=run_id))["workflowRun"]
    (version,) = run["functionVersions"]
    assert version["handler"] == "main:inc"
    assert version["function"]["name"] == "inc"
    assert [n["functionVersionId"] for n in run["nodeStates"]] == [version["id"]] * 3
