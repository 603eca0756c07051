"""Issue 27 (contract 8b, what one user may spend): one user's flood of slow requests holds at
most `CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER` of a serve process's requests; the next one
is answered 429 `QuotaExceeded` with `Retry-After` before its body is read, while another
user's request is admitted as before, and a slot is given back however its request ends."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from calcgraph.app import create_app
from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.db.engine import Database
from calcgraph.serving.inflight import InFlightLimitMiddleware
from calcgraph.settings import Settings
from tests.tenancy.asgi_calls import call, scope_of

Headers = Callable[..., dict[str, str]]
LIMIT = 3


class _Slow:
    """An ASGI app whose requests wait until the test lets them go; counts what it admitted."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.admitted: list[str] = []
        self.fail = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.admitted.append(scope["state"][PRINCIPAL_KEY].username)
        await self.release.wait()
        if self.fail:
            raise RuntimeError("the handler failed")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _admitted(slow: _Slow, count: int) -> None:
    for _ in range(1000):
        if len(slow.admitted) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"only {slow.admitted} were admitted")


async def test_one_users_100_slow_requests_leave_another_users_request_its_place() -> None:
    slow = _Slow()
    middleware = InFlightLimitMiddleware(slow, limit=LIMIT)
    flood = [asyncio.create_task(call(middleware, scope_of("mallory"))) for _ in range(100)]
    await _admitted(slow, LIMIT)
    refused = [task for task in flood if task.done()]
    assert len(refused) == 100 - LIMIT
    for task in refused:
        status, headers, body = task.result()
        assert status == 429
        assert headers["retry-after"] == "1"
        assert json.loads(body)["detail"].startswith("QuotaExceeded: ")
    # alice is admitted while mallory's requests all still wait; /health is never counted.
    other = asyncio.create_task(call(middleware, scope_of("alice")))
    health = asyncio.create_task(call(middleware, scope_of("mallory", "/health")))
    await _admitted(slow, LIMIT + 2)
    assert slow.admitted == ["mallory"] * LIMIT + ["alice", "mallory"]
    slow.release.set()
    assert (await other)[0] == 200
    assert (await health)[0] == 200
    assert [(await task)[0] for task in flood if task not in refused] == [200] * LIMIT
    assert middleware.in_flight == {}


async def test_a_slot_is_given_back_when_its_request_fails() -> None:
    slow = _Slow()
    slow.fail = True
    slow.release.set()
    middleware = InFlightLimitMiddleware(slow, limit=1)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            await call(middleware, scope_of("mallory"))
    assert middleware.in_flight == {}
    assert slow.admitted == ["mallory"] * 3


async def test_zero_means_no_limit() -> None:
    slow = _Slow()
    middleware = InFlightLimitMiddleware(slow, limit=0)
    flood = [asyncio.create_task(call(middleware, scope_of("mallory"))) for _ in range(50)]
    await _admitted(slow, 50)
    slow.release.set()
    assert [(await task)[0] for task in flood] == [200] * 50


# The served application: the setting reaches the door, REST and GraphQL alike.


def _subject(headers: dict[str, str]) -> str:
    payload = headers["Authorization"].split()[1].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["sub"])


def _in_flight(app: Starlette) -> InFlightLimitMiddleware:
    layer: Any = app.middleware_stack
    while layer is not None and not isinstance(layer, InFlightLimitMiddleware):
        layer = getattr(layer, "app", None)
    assert isinstance(layer, InFlightLimitMiddleware)
    return layer


@pytest.fixture
async def limited(
    settings: Settings, database: Database
) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    app = create_app(
        settings.model_copy(update={"limit_requests_in_flight_per_user": LIMIT}), database
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield app, c


@pytest.mark.db
async def test_the_door_refuses_a_user_at_the_limit_and_admits_another(
    limited: tuple[Starlette, httpx.AsyncClient], bearer: Headers
) -> None:
    app, client = limited
    mallory, alice = bearer("mallory"), bearer("alice")
    assert (await client.get("/jobs", headers=mallory)).status_code == 200
    middleware = _in_flight(app)
    assert middleware.limit == LIMIT
    middleware.in_flight[_subject(mallory)] = LIMIT  # as if three of hers were still running
    for refused in (
        await client.get("/jobs", headers=mallory),
        await client.post("/graphql", json={"query": "{ me { username } }"}, headers=mallory),
    ):
        assert refused.status_code == 429, refused.text
        assert refused.json()["detail"].startswith("QuotaExceeded: ")
        assert "CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER" in refused.json()["detail"]
        assert refused.headers["Retry-After"] == "1"
    answer = await client.post("/graphql", json={"query": "{ me { username } }"}, headers=alice)
    assert answer.json() == {"data": {"me": {"username": "alice"}}}
    assert (await client.get("/health")).status_code == 200
    middleware.in_flight[_subject(mallory)] = LIMIT - 1
    assert (await client.get("/jobs", headers=mallory)).status_code == 200
    assert middleware.in_flight == {_subject(mallory): LIMIT - 1}
