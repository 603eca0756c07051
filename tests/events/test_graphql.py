"""GraphQL `events` query and `events` subscription (graphql-transport-ws on a real server,
and multipart HTTP): run events pushed as recorded, to their owner only."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.door.test_websocket import alice_run, bearer, receive, session
from tests.execution.conftest import Platform
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

QUERY = """
query($types: [String!], $after: String, $wait: Float!) {
  events(types: $types, after: $after, wait: $wait) {
    items { specversion id source type subject time datacontenttype data }
    nextCursor
  }
}
"""
SUBSCRIBE = """
subscription($types: [String!]) { events(types: $types) { id type subject data } }
"""


@pytest.fixture(scope="module")
def served(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with serve(exec_url, identity_provider, tmp_path_factory.mktemp("served")) as running:
        yield running


async def test_query_lists_the_callers_events(platform: Platform) -> None:
    await platform.user("alice")
    headers = platform.headers("alice")
    now = await platform.client.post(
        "/graphql", json={"query": QUERY, "variables": {"after": "now", "wait": 0}}, headers=headers
    )
    start = now.json()["data"]["events"]["nextCursor"]
    name = f"gq-{uuid.uuid4().hex[:8]}"
    body = {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": {"name": name, "version": "1.0.0", "versioning_strategy": "auto"},
            "functions": {"run": {"handler": "main:run"}},
        },
        "files": {"main.py": "def run(**kw):\n    return kw\n"},
    }
    published = await platform.client.post("/packages", json=body, headers=headers)
    assert published.status_code == 201, published.text
    answer = await platform.client.post(
        "/graphql",
        json={
            "query": QUERY,
            "variables": {"types": ["calcgraph.file.*"], "after": start, "wait": 5},
        },
        headers=headers,
    )
    page = answer.json()["data"]["events"]
    assert [e["subject"] for e in page["items"]] == [published.json()["package_id"]]
    event = page["items"][0]
    assert event["specversion"] == "1.0"
    assert event["type"] == "calcgraph.file.uploaded"
    assert event["data"]["uploaded_by"] == "alice"


async def test_query_refuses_bad_arguments(platform: Platform) -> None:
    await platform.user("alice")
    for variables in ({"types": ["nope"], "wait": 0}, {"wait": 31}, {"after": "x", "wait": 0}):
        answer = await platform.client.post(
            "/graphql", json={"query": QUERY, "variables": variables}, headers=platform.headers()
        )
        errors = answer.json()["errors"]
        assert errors[0]["extensions"]["code"] == "ValidationError", errors


async def _next_event(ws: Any) -> dict[str, Any]:
    message = await receive(ws)
    assert message["type"] == "next", message
    assert "errors" not in message["payload"], message
    event: dict[str, Any] = message["payload"]["data"]["events"]
    return event


async def test_subscription_pushes_run_events_to_their_owner_only(served: Served) -> None:
    async with (
        session(served, bearer(served, "alice")) as alice_ws,
        session(served, bearer(served, "bob")) as bob_ws,
    ):
        for ws in (alice_ws, bob_ws):
            assert (await receive(ws))["type"] == "connection_ack"
            payload = {"query": SUBSCRIBE, "variables": {"types": ["calcgraph.run.*"]}}
            await ws.send(json.dumps({"id": "ev", "type": "subscribe", "payload": payload}))
        await asyncio.sleep(0.5)  # both subscriptions listen before the run is created
        run_id = await alice_run(served)
        created = await _next_event(alice_ws)
        assert created["type"] == "calcgraph.run.created"
        assert created["subject"] == run_id
        # Bob's first event is about his own run: alice's never reached him.
        bobs = await alice_run_as(served, "bob")
        first = await _next_event(bob_ws)
        assert first["subject"] == bobs


async def alice_run_as(served: Served, user: str) -> str:
    headers = bearer(served, user)
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=60) as client:
        pkg = f"ev-{uuid.uuid4().hex[:8]}"
        slug = f"ev-{uuid.uuid4().hex[:8]}"
        manifest = {
            "kind": "package",
            "version": 1,
            "package": {"name": pkg, "version": "1.0.0", "versioning_strategy": "auto"},
            "functions": {
                "inc": {
                    "handler": "main:inc",
                    "inputs": {"x": {"type": "Float", "required": True}},
                    "outputs": {"y": {"type": "Float"}},
                }
            },
        }
        files = {"main.py": "def inc(x):\n    return {'y': x + 1}\n"}
        published = await client.post("/packages", json={"manifest": manifest, "files": files})
        assert published.status_code == 201, published.text
        graph = {"nodes": [inp("x"), fn("A", f"{pkg}/inc", x="x")]}
        created = await client.post("/workflows", json={"slug": slug, "name": slug, "graph": graph})
        assert created.status_code == 201, created.text
        run = await client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}})
        assert run.status_code == 201, run.text
        run_id: str = run.json()["id"]
        return run_id


async def test_multipart_subscription_streams_events(served: Served) -> None:
    headers = {
        **bearer(served, "alice"),
        "Accept": "multipart/mixed;subscriptionSpec=1.0, application/json",
    }
    body = {"query": SUBSCRIBE, "variables": {"types": ["calcgraph.run.created"]}}
    async with (
        httpx.AsyncClient(base_url=served.url, timeout=60) as client,
        client.stream("POST", "/graphql", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        creator = asyncio.create_task(_create_later(served))
        async for line in response.aiter_lines():
            if line.startswith("{") and '"payload"' in line:
                payload = json.loads(line)["payload"]
                event = payload["data"]["events"]
                break
        run_id = await creator
    assert event["type"] == "calcgraph.run.created"
    assert event["subject"] == run_id


async def _create_later(served: Served) -> str:
    await asyncio.sleep(0.5)
    return await alice_run(served)
