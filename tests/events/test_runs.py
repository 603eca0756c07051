"""Run events (contract section 9): created, completed with its terminal outputs, failed with
its first failed node; node jobs' events name their run and node."""

from __future__ import annotations

import uuid

import pytest

from tests.events.helpers import events
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


async def _run(platform: Platform, function: str) -> str:
    pkg = f"evr-{uuid.uuid4().hex[:8]}"
    headers = platform.headers("alice")
    await publish(
        platform.client, headers, small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS)
    )
    slug = f"evr-{uuid.uuid4().hex[:8]}"
    graph = {
        "nodes": [inp("x"), fn("A", f"{pkg}/inc", x="x"), fn("B", f"{pkg}/{function}", x="A.y")]
    }
    created = await platform.client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
    )
    assert created.status_code == 201, created.text
    run = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
    )
    assert run.status_code == 201, run.text
    run_id: str = run.json()["id"]
    for _ in range(60):
        ticked = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": 5}, headers=headers
        )
        if ticked.json()["status"] in ("completed", "failed"):
            break
    return run_id


async def test_a_completed_run(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    start = (await events(platform, after="now"))["next_cursor"]
    run_id = await _run(platform, "inc")
    body = await events(platform, after=start, subject=run_id)
    assert [e["type"] for e in body["items"]] == [
        "calcgraph.run.created",
        "calcgraph.run.completed",
    ]
    created, completed = body["items"]
    assert created["data"]["status"] == "pending"
    assert created["data"]["workflow"].startswith("evr-")
    assert completed["data"]["run_id"] == run_id
    assert completed["data"]["status"] == "completed"
    assert completed["data"]["first_failed_node_key"] is None
    assert completed["data"]["terminal_outputs"]
    jobs = await events(platform, after=start, type="calcgraph.job.*")
    nodes = {e["data"]["node_key"] for e in jobs["items"] if e["data"]["run_id"] == run_id}
    assert nodes == {"A", "B"}
    bob = await events(platform, "bob", after=start, subject=run_id)
    assert bob["items"] == []


async def test_a_failed_run(platform: Platform) -> None:
    await platform.user("alice")
    start = (await events(platform, after="now"))["next_cursor"]
    run_id = await _run(platform, "boom")
    body = await events(platform, after=start, subject=run_id, type="calcgraph.run.*")
    assert [e["type"] for e in body["items"]] == ["calcgraph.run.created", "calcgraph.run.failed"]
    failed = body["items"][1]["data"]
    assert failed["first_failed_node_key"] == "B"
    assert failed["terminal_outputs"] is None
    job_failed = await events(platform, after=start, type="calcgraph.job.failed")
    mine = [e for e in job_failed["items"] if e["data"]["run_id"] == run_id]
    assert [e["data"]["node_key"] for e in mine] == ["B"]
    assert mine[0]["data"]["error"]["kind"] == "user_error"
