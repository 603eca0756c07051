"""GraphQL over WebSocket (contract section 4b): `graphql-transport-ws` on `/graphql`, with the
token in `connection_init`, spoken by a real client (`websockets`) over a real socket to a real
uvicorn server. Without a valid token: close 4401; the legacy `graphql-ws` protocol is off;
`runUpdates` streams a run to its end; someone else's run answers an error, not its state."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.client.conftest import Served
from tests.packages.publishing import small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

PROTOCOL = "graphql-transport-ws"
RUN_UPDATES = """
subscription($id: ID!) {
  runUpdates(id: $id, interval: 0.2) { id status nodeStates { nodeKey status } }
}
"""


def ws_url(served: Served) -> str:
    return served.url.replace("http://", "ws://") + "/graphql"


@asynccontextmanager
async def session(
    served: Served, payload: dict[str, Any] | None, **options: Any
) -> AsyncIterator[ClientConnection]:
    async with connect(
        ws_url(served),
        subprotocols=[PROTOCOL],
        open_timeout=10,
        **options,  # type: ignore[list-item]
    ) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": payload or {}}))
        yield ws


async def receive(ws: ClientConnection, seconds: float = 60) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), seconds))
    return message


async def closed_with(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed):
        await receive(ws, seconds=10)
    return ws.close_code


def bearer(served: Served, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {served.token(user)}"}


class TestConnectionInit:
    async def test_without_a_token_the_server_closes_4401(self, served: Served) -> None:
        async with session(served, {}) as ws:
            assert await closed_with(ws) == 4401
            assert ws.close_reason is not None
            assert "Authorization" in ws.close_reason

    @pytest.mark.parametrize(
        "header", ["Bearer not-a-jwt", "Basic YWxpY2U6c2VjcmV0", "Bearer " + "a" * 20000]
    )
    async def test_an_invalid_token_closes_4401(self, served: Served, header: str) -> None:
        async with session(served, {"Authorization": header}) as ws:
            assert await closed_with(ws) == 4401
            assert (ws.close_reason or "").startswith("Unauthenticated: ")

    async def test_a_subscribe_before_init_closes_4401(self, served: Served) -> None:
        async with connect(ws_url(served), subprotocols=[PROTOCOL]) as ws:  # type: ignore[list-item]
            message = {"id": "1", "type": "subscribe", "payload": {"query": "{ me { id } }"}}
            await ws.send(json.dumps(message))
            assert await closed_with(ws) == 4401

    async def test_the_legacy_graphql_ws_protocol_is_off(self, served: Served) -> None:
        async with connect(ws_url(served), subprotocols=["graphql-ws"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol is None
            assert await closed_with(ws) == 4406

    async def test_a_valid_token_is_acknowledged_and_is_the_caller(self, served: Served) -> None:
        async with session(served, bearer(served, "bob")) as ws:
            assert (await receive(ws))["type"] == "connection_ack"
            query = {"query": "{ me { username } }"}
            await ws.send(json.dumps({"id": "q", "type": "subscribe", "payload": query}))
            answer = await receive(ws)
            assert answer == {
                "id": "q",
                "type": "next",
                "payload": {"data": {"me": {"username": "bob"}}},
            }
            assert (await receive(ws)) == {"id": "q", "type": "complete"}


async def alice_run(served: Served) -> str:
    pkg = f"ws-{uuid.uuid4().hex[:8]}"
    slug = f"ws-{uuid.uuid4().hex[:8]}"
    headers = bearer(served, "alice")
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=60) as client:
        published = await client.post(
            "/packages", json=small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS)
        )
        assert published.status_code == 201, published.text
        graph = {"nodes": [inp("x"), fn("A", f"{pkg}/inc", x="x"), fn("B", f"{pkg}/inc", x="A.y")]}
        created = await client.post("/workflows", json={"slug": slug, "name": slug, "graph": graph})
        assert created.status_code == 201, created.text
        run = await client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}})
        assert run.status_code in (200, 201, 202), run.text
        run_id: str = run.json()["id"]
        return run_id


class TestRunUpdates:
    async def test_the_owner_watches_the_run_to_its_end(self, served: Served) -> None:
        run_id = await alice_run(served)
        async with session(served, bearer(served, "alice")) as ws:
            assert (await receive(ws))["type"] == "connection_ack"
            payload = {"query": RUN_UPDATES, "variables": {"id": run_id}}
            await ws.send(json.dumps({"id": "run", "type": "subscribe", "payload": payload}))
            updates = []
            while (message := await receive(ws))["type"] == "next":
                assert "errors" not in message["payload"], message
                updates.append(message["payload"]["data"]["runUpdates"])
            assert message == {"id": "run", "type": "complete"}
        assert updates[-1]["status"] == "completed"
        assert {n["status"] for n in updates[-1]["nodeStates"]} == {"success"}

    async def test_someone_elses_run_answers_an_error(self, served: Served) -> None:
        run_id = await alice_run(served)
        async with session(served, bearer(served, "bob")) as ws:
            assert (await receive(ws))["type"] == "connection_ack"
            payload = {"query": RUN_UPDATES, "variables": {"id": run_id}}
            await ws.send(json.dumps({"id": "run", "type": "subscribe", "payload": payload}))
            message = await receive(ws)
            if message["type"] == "next":  # an error as an execution result
                errors = message["payload"]["errors"]
                assert message["payload"].get("data") is None
                message = await receive(ws)
            else:
                assert message["type"] == "error"
                errors = message["payload"]
            codes = {e["extensions"]["code"] for e in errors}
            assert codes <= {"PermissionDenied", "NotFound"}
            assert codes
            assert "completed" not in json.dumps(errors)


class TestOrigins:
    async def test_an_allowed_origin_may_open_a_socket(self, served: Served) -> None:
        origin = "https://dash.example.com"
        async with session(served, bearer(served), origin=origin) as ws:  # type: ignore[arg-type]
            assert (await receive(ws))["type"] == "connection_ack"

    async def test_a_foreign_origin_may_not(self, served: Served) -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with session(served, bearer(served), origin="https://evil.example"):  # type: ignore[arg-type]
                pass
        assert refused.value.response.status_code == 403
