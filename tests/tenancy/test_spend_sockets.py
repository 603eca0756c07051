"""Issue 27, point 3 (contract 8b, sockets): a WebSocket must send `connection_init` in time
(else 4408); a process holds a bounded number of sockets per user and of sockets not yet
authenticated per client address (4429 `QuotaExceeded: ...`); a socket closes with 4401 when
its token expires, and a subscription followed over HTTP (multipart) ends with Unauthenticated
then, its run no longer ticked on that caller's behalf. Real sockets on a real uvicorn server;
small limits here so that the settings are seen to take effect."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.packages.publishing import small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

PROTOCOL = "graphql-transport-ws"
PER_USER = 3
PENDING = 4


@pytest.fixture(scope="module")
def served(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with serve(
        exec_url,
        identity_provider,
        tmp_path_factory.mktemp("spend-sockets"),
        oidc_leeway_seconds=0,
        limit_socket_init_seconds=1,
        limit_sockets_per_user=PER_USER,
        limit_pending_sockets_per_address=PENDING,
    ) as running:
        yield running


def ws_url(served: Served) -> str:
    return served.url.replace("http://", "ws://") + "/graphql"


def short_token(served: Served, user: str, seconds: float) -> str:
    claims = served.idp.claims(user)
    claims["exp"] = int(time.time() + seconds)
    return served.idp.sign(claims)


@contextlib.asynccontextmanager
async def opened(served: Served) -> AsyncIterator[ClientConnection]:
    async with connect(ws_url(served), subprotocols=[PROTOCOL], open_timeout=60) as ws:  # type: ignore[list-item]
        yield ws


async def init(ws: ClientConnection, token: str) -> None:
    payload = {"Authorization": f"Bearer {token}"}
    await ws.send(json.dumps({"type": "connection_init", "payload": payload}))


async def receive(ws: ClientConnection, seconds: float = 15) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), seconds))
    return message


async def _until_closed(ws: ClientConnection, seconds: float) -> None:
    while True:
        await receive(ws, seconds)


async def closed_with(ws: ClientConnection, seconds: float = 15) -> int | None:
    with pytest.raises(ConnectionClosed):
        await _until_closed(ws, seconds)
    return ws.close_code


class TestConnectionInit:
    async def test_a_silent_socket_is_closed_4408(self, served: Served) -> None:
        async with opened(served) as ws:
            assert await closed_with(ws, seconds=15) == 4408

    async def test_an_initialised_socket_stays(self, served: Served) -> None:
        async with opened(served) as ws:
            await init(ws, served.token("alice"))
            assert (await receive(ws))["type"] == "connection_ack"


class TestSocketCounts:
    async def test_sockets_not_yet_authenticated_are_bounded_per_address(
        self, served: Served
    ) -> None:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(PENDING):
                await stack.enter_async_context(opened(served))
            extra = await stack.enter_async_context(opened(served))
            assert await closed_with(extra) == 4429
            assert (extra.close_reason or "").startswith("QuotaExceeded: ")
        # Closed, they no longer count: a new socket is served.
        await asyncio.sleep(0.2)
        async with opened(served) as ws:
            await init(ws, served.token("alice"))
            assert (await receive(ws))["type"] == "connection_ack"

    async def test_open_sockets_are_bounded_per_user(self, served: Served) -> None:
        user = f"sock-{uuid.uuid4().hex[:6]}"
        async with contextlib.AsyncExitStack() as stack:
            sockets = []
            for _ in range(PER_USER):
                ws = await stack.enter_async_context(opened(served))
                await init(ws, served.token(user))
                assert (await receive(ws))["type"] == "connection_ack"
                sockets.append(ws)
            async with opened(served) as extra:
                await init(extra, served.token(user))
                assert await closed_with(extra) == 4429
                assert "sockets per user" in (extra.close_reason or "")
            # Another user is not counted against this one.
            async with opened(served) as other:
                await init(other, served.token(f"other-{uuid.uuid4().hex[:6]}"))
                assert (await receive(other))["type"] == "connection_ack"
            await sockets[0].close()
            await asyncio.sleep(0.2)
            async with opened(served) as again:
                await init(again, served.token(user))
                assert (await receive(again))["type"] == "connection_ack"


class TestTokenExpiry:
    async def test_the_socket_closes_4401_when_its_token_expires(self, served: Served) -> None:
        async with opened(served) as ws:
            await init(ws, short_token(served, "alice", 2))
            assert (await receive(ws))["type"] == "connection_ack"
            query = {"query": "{ me { username } }"}
            await ws.send(json.dumps({"id": "q", "type": "subscribe", "payload": query}))
            assert (await receive(ws))["payload"] == {"data": {"me": {"username": "alice"}}}
            assert await closed_with(ws) == 4401
            assert "expired" in (ws.close_reason or "")

    async def test_a_followed_run_stops_with_its_token(self, served: Served) -> None:
        run_id = await slow_run(served, seconds=4)
        subscription = """subscription($id: ID!) {
          runUpdates(id: $id, interval: 0.2) { status nodeStates { nodeKey status jobId } }
        }"""
        headers = {
            "Authorization": f"Bearer {short_token(served, 'alice', 2)}",
            "Accept": "multipart/mixed;subscriptionSpec=1.0, application/json",
        }
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            response = await client.post(
                "/graphql",
                json={"query": subscription, "variables": {"id": run_id}},
                headers=headers,
            )
        parts = [json.loads(line) for line in response.text.splitlines() if line.startswith("{")]
        payloads = [p["payload"] for p in parts if p.get("payload")]
        assert payloads, response.text
        errors = [e for p in payloads for e in p.get("errors") or ()]
        assert [e["extensions"]["code"] for e in errors] == ["Unauthenticated"], payloads
        updates = [p["data"]["runUpdates"] for p in payloads if p.get("data")]
        assert updates
        assert updates[-1]["status"] == "running"
        [job_id] = [n["jobId"] for n in updates[-1]["nodeStates"] if n["jobId"]]
        # The job ends; nobody ticks the run for the expired caller, so it stays running.
        fresh = {"Authorization": f"Bearer {served.token('alice')}"}
        async with httpx.AsyncClient(base_url=served.url, headers=fresh, timeout=30) as client:
            for _ in range(300):
                job = (await client.get(f"/jobs/{job_id}")).json()
                if job["status"] in ("success", "failed"):
                    break
                await asyncio.sleep(0.1)
            assert job["status"] == "success", job
            await asyncio.sleep(1.0)  # five follow intervals
            run = (await client.get(f"/workflow-runs/{run_id}")).json()
        assert run["status"] == "running", run


async def slow_run(served: Served, seconds: float) -> str:
    pkg = f"spend-{uuid.uuid4().hex[:8]}"
    slug = f"spend-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {served.token('alice')}"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=60) as client:
        published = await client.post(
            "/packages", json=small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS)
        )
        assert published.status_code == 201, published.text
        graph = {"nodes": [inp("x"), fn("A", f"{pkg}/slow", x="x")]}
        created = await client.post("/workflows", json={"slug": slug, "name": slug, "graph": graph})
        assert created.status_code == 201, created.text
        run = await client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": seconds}})
        assert run.status_code in (200, 201, 202), run.text
        run_id: str = run.json()["id"]
        return run_id
