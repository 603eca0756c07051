"""A whole run over GraphQL reads only what the query selects (issue 14): the jobs of its
nodes as projections of the selected fields, node outputs and the plan snapshot only when
asked; the answers are those of the paged path and of `job(id)`. An ended run leaves the
process's run memo."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from sqlalchemy import event

from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.views import NodeRow
from tests.execution.conftest import Platform
from tests.runs.test_graphql_api import _chain_run, _gql

pytestmark = pytest.mark.db

JOB = """id status functionId functionVersionId packageId inputs outputs error logs cacheHit
createdAt startedAt finishedAt"""
WHOLE = f"""query W($id: ID!) {{ workflowRun(id: $id) {{
  nodeStates {{ nodeKey status outputs ...J }} }} }}
fragment J on NodeState {{ job {{ {JOB} package {{ name }} }} }}"""
PAGE = f"""query P($id: ID!, $after: String) {{ workflowRun(id: $id) {{
  nodeStates(first: 2, after: $after) {{ nodeKey status outputs
    job {{ {JOB} package {{ name }} }} }} }} }}"""
ONE_JOB = f"query J($id: ID!) {{ job(id: $id) {{ {JOB} package {{ name }} }} }}"


async def _statements(platform: Platform, query: str, **variables: Any) -> list[str]:
    statements: list[str] = []

    def seen(*args: Any) -> None:
        statements.append(str(args[2]))

    engine = platform.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        await _gql(platform, query, **variables)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    return statements


async def test_whole_run_answers_what_pages_and_job_answer(platform: Platform) -> None:
    run_id = await _chain_run(platform, 5)
    whole = (await _gql(platform, WHOLE, id=run_id))["workflowRun"]["nodeStates"]
    paged: list[dict[str, Any]] = []
    after = None
    while True:
        page = (await _gql(platform, PAGE, id=run_id, after=after))["workflowRun"]["nodeStates"]
        paged += page
        if len(page) < 2:
            break
        after = page[-1]["nodeKey"]
    assert whole == paged
    assert len(whole) == 5
    for node in whole:
        job = node["job"]
        assert job == (await _gql(platform, ONE_JOB, id=job["id"]))["job"]
        assert job["status"] == "success"
        assert job["outputs"] == node["outputs"]
        assert job["inputs"]
        assert job["createdAt"]
        assert job["package"]["name"]


async def test_a_whole_run_reads_no_plan_and_no_outputs_unless_asked(platform: Platform) -> None:
    run_id = await _chain_run(platform, 3)
    lean = """query L($id: ID!) { workflowRun(id: $id) { id status
      nodeStates { nodeKey status startedAt job { id status finishedAt } } } }"""
    statements = await _statements(platform, lean, id=run_id)
    assert not [s for s in statements if "plan_snapshot" in s]
    assert not [s for s in statements if "node_states.outputs" in s]
    assert not [s for s in statements if "jobs.inputs" in s or "jobs.logs" in s]

    full = """query F($id: ID!) { workflowRun(id: $id) { planSnapshot
      nodeStates { nodeKey functionVersionId outputs } } }"""
    run = (await _gql(platform, full, id=run_id))["workflowRun"]
    rest = await platform.client.get(f"/workflow-runs/{run_id}", headers=platform.headers("alice"))
    assert run["planSnapshot"] == rest.json()["plan_snapshot"]
    versions = {n["node_key"]: n["function_version_id"] for n in run["planSnapshot"]["nodes"]}
    for node in run["nodeStates"]:
        assert node["functionVersionId"] == versions[node["nodeKey"]]
        assert node["outputs"] == {"y": float(int(node["nodeKey"][1:]) + 1)}


async def test_an_ended_run_leaves_the_run_memo(platform: Platform) -> None:
    run_id = await _chain_run(platform, 2)
    assert run_service.memo.plans.get(run_id) is None
    found = await platform.client.post(
        f"/workflow-runs/{run_id}/tick", headers=platform.headers("alice")
    )
    assert found.json()["status"] == "completed"
    assert len(found.json()["node_states"]) == 2
    assert run_service.memo.plans.get(run_id) is None  # ticking an ended run does not bring it back


async def test_a_query_leaves_no_rows_for_the_collector(platform: Platform) -> None:
    # Rows remembered by a request's loaders sat in reference cycles until a full collection
    # (the server grew by megabytes a whole-run query); released, they go with the request.
    run_id = await _chain_run(platform, 4)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        await _gql(platform, WHOLE, id=run_id)
        gc.collect()
        kept = [o for o in gc.garbage if isinstance(o, NodeRow | NodeState)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert kept == []


FIRST_PAGE = """query P($id: ID!) { workflowRun(id: $id) { id status
  nodeStates(first: 100) { nodeKey status startedAt job { id status finishedAt } } } }"""


async def test_a_first_page_with_its_jobs_costs_what_it_did_at_any_size(
    platform: Platform,
) -> None:
    """The first page of a finished run with its jobs (the query of `scale_nodes_http`): the
    run with its access facts, the page (on PostgreSQL after the `SET LOCAL` that steers its
    plan, `dialect.without_sorts`) and the page's jobs, one statement each and three read
    sessions (on SQLite each with its BEGIN), whatever the run's size."""
    engine = platform.database.engine.sync_engine
    ceiling = 4 if engine.dialect.name == "postgresql" else 6
    counts = []
    for length in (2, 6):
        run_id = await _chain_run(platform, length)
        await _gql(platform, FIRST_PAGE, id=run_id)  # warm: nothing cached changes the count
        checkouts = 0

        def checkout(*_: Any) -> None:
            nonlocal checkouts
            checkouts += 1

        event.listen(engine.pool, "checkout", checkout)
        try:
            statements = await _statements(platform, FIRST_PAGE, id=run_id)
        finally:
            event.remove(engine.pool, "checkout", checkout)
        page = (await _gql(platform, FIRST_PAGE, id=run_id))["workflowRun"]["nodeStates"]
        assert [n["job"]["status"] for n in page] == ["success"] * length
        assert len(statements) <= ceiling, statements
        assert checkouts <= 3
        counts.append((len(statements), checkouts))
    assert counts[0] == counts[1]
