"""`runUpdates`: a subscription (HTTP multipart) that drives the run for its subscribers, one
ticking loop per run however many subscribe, and ends when the run is terminal."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from calcgraph.services import services_of
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

SUBSCRIBE = """
subscription Updates($id: ID!, $interval: Float!) {
  runUpdates(id: $id, interval: $interval) {
    id status revision terminalOutputs nodeStates { nodeKey status }
  }
}
"""


async def _run(platform: Platform) -> str:
    pkg = f"sub-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    slug = f"sub-{uuid.uuid4().hex[:8]}"
    nodes = [
        inp("x"),
        fn("A", f"{pkg}/inc", x="x"),
        fn("B", f"{pkg}/inc", x="A.y"),
        fn("C", f"{pkg}/inc", x="A.y"),
        fn("D", f"{pkg}/add", a="B.y", b="C.y"),
    ]
    headers = platform.headers("alice")
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    assert (await platform.client.post("/workflows", json=body, headers=headers)).status_code == 201
    created = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
    )
    run_id: str = created.json()["id"]
    return run_id


async def _subscribe(platform: Platform, run_id: str, user: str = "alice") -> list[dict[str, Any]]:
    headers = {
        **platform.headers(user),
        "Accept": "multipart/mixed;subscriptionSpec=1.0, application/json",
    }
    response = await platform.client.post(
        "/graphql",
        json={"query": SUBSCRIBE, "variables": {"id": run_id, "interval": 0.2}},
        headers=headers,
        timeout=60,
    )
    assert response.status_code == 200, response.text
    parts = [json.loads(line) for line in response.text.splitlines() if line.startswith("{")]
    return [p["payload"] for p in parts if p.get("payload")]


async def test_subscribers_share_one_loop_until_terminal(platform: Platform) -> None:
    run_id = await _run(platform)
    tickers = services_of(platform.app).execution.tickers
    started = tickers.started
    first, second = await asyncio.gather(_subscribe(platform, run_id), _subscribe(platform, run_id))
    assert tickers.started == started + 1
    for payloads in (first, second):
        assert all("errors" not in p for p in payloads), payloads
        updates = [p["data"]["runUpdates"] for p in payloads]
        revisions = [u["revision"] for u in updates]
        assert revisions == sorted(set(revisions))  # each pushed state changed something
        assert updates[-1]["status"] == "completed"
        assert updates[-1]["terminalOutputs"] == {"D": {"y": 6.0}}
    assert [u["data"]["runUpdates"]["revision"] for u in first][-1] == [
        u["data"]["runUpdates"]["revision"] for u in second
    ][-1]


async def test_hidden_run_is_refused(platform: Platform) -> None:
    run_id = await _run(platform)
    payloads = await _subscribe(platform, run_id, user="bob")
    assert payloads[0]["errors"][0]["extensions"]["code"] == "PermissionDenied"
