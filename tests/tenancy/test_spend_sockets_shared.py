"""Issue 27, point 3 completed (contract 8b, sockets): the socket counts (per user, and not yet
authenticated per client address) hold across serve processes. With Redis configured, two
applications on one Redis and one database (the shape of `serve --workers 2`), each on its own
uvicorn server, count each other's sockets; a process that dies without closing its sockets
stops counting them once their leases end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio
from websockets.asyncio.client import ClientConnection, connect

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.tenancy.test_spend_sockets import PROTOCOL, closed_with, init, receive, ws_url

pytestmark = pytest.mark.db

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/12")
PER_USER = 3
PENDING = 4
PREFIX = f"sockets-{uuid.uuid4().hex[:8]}:"


async def _counted(key: str, sockets: int) -> None:
    """Until the shared count holds `sockets`. A server counts a socket in just after its
    handshake, and out once its handler ends, just after the client's close: a client cannot
    tell when, so the test waits for the count before its next step (otherwise the fifth socket,
    on the other process, can be counted before the fourth and the fourth is the one refused)."""
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    try:
        for _ in range(600):
            if await client.zcard(f"{PREFIX}calcgraph:sockets:{key}") == sockets:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the shared count of {key} never reached {sockets}")
    finally:
        await client.aclose()


async def _drained(key: str) -> None:
    """Until the sockets of an earlier test have left the shared count."""
    await _counted(key, 0)


def _redis_or_skip() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")


@pytest.fixture(scope="module")
def two_servers(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, Served]]:
    _redis_or_skip()
    prefix = PREFIX
    options = {
        "redis_url": REDIS_URL,
        "redis_key_prefix": prefix,
        "limit_sockets_per_user": PER_USER,
        "limit_pending_sockets_per_address": PENDING,
        "limit_socket_init_seconds": 30,
    }
    with (
        serve(exec_url, identity_provider, tmp_path_factory.mktemp("one"), **options) as one,
        serve(exec_url, identity_provider, tmp_path_factory.mktemp("two"), **options) as two,
    ):
        yield one, two


@contextlib.asynccontextmanager
async def opened(served: Served) -> AsyncIterator[ClientConnection]:
    async with connect(ws_url(served), subprotocols=[PROTOCOL], open_timeout=60) as ws:  # type: ignore[list-item]
        yield ws


class TestSocketCountsAcrossProcesses:
    async def test_sockets_per_user_are_counted_across_serve_processes(
        self, two_servers: tuple[Served, Served]
    ) -> None:
        one, two = two_servers
        user = f"shared-{uuid.uuid4().hex[:6]}"
        await _drained("pending:127.0.0.1")
        async with contextlib.AsyncExitStack() as stack:
            for served in (one, two, one):
                ws = await stack.enter_async_context(opened(served))
                await init(ws, served.token(user))
                assert (await receive(ws))["type"] == "connection_ack"
            for served in (two, one):
                async with opened(served) as extra:
                    await init(extra, served.token(user))
                    assert await closed_with(extra) == 4429
                    assert "sockets per user" in (extra.close_reason or "")
            async with opened(two) as other:  # another user is not counted against this one
                await init(other, two.token(f"other-{uuid.uuid4().hex[:6]}"))
                assert (await receive(other))["type"] == "connection_ack"
        await asyncio.sleep(0.3)  # closed, they no longer count, on either process
        async with opened(two) as again:
            await init(again, two.token(user))
            assert (await receive(again))["type"] == "connection_ack"

    async def test_unauthenticated_sockets_per_address_are_counted_across_serve_processes(
        self, two_servers: tuple[Served, Served]
    ) -> None:
        one, two = two_servers
        await _drained("pending:127.0.0.1")
        async with contextlib.AsyncExitStack() as stack:
            for n, served in enumerate((one, two, one, two), start=1):
                await stack.enter_async_context(opened(served))
                await _counted("pending:127.0.0.1", n)
            for served in (one, two):
                extra = await stack.enter_async_context(opened(served))
                assert await closed_with(extra) == 4429
                assert (extra.close_reason or "").startswith("QuotaExceeded: ")
        await asyncio.sleep(0.3)
        async with opened(one) as ws:
            await init(ws, one.token("alice"))
            assert (await receive(ws))["type"] == "connection_ack"


class TestADeadProcessesSockets:
    async def test_sockets_of_a_dead_process_stop_counting_when_their_leases_end(self) -> None:
        from calcgraph.ops.socket_census import RedisCensus, Seat

        _redis_or_skip()
        prefix = f"lease-{uuid.uuid4().hex[:8]}:"
        dead = RedisCensus(
            REDIS_URL, per_user=2, pending_per_address=2, prefix=prefix, lease_seconds=1
        )
        alive = RedisCensus(
            REDIS_URL, per_user=2, pending_per_address=2, prefix=prefix, lease_seconds=1
        )
        try:
            for _ in range(2):
                seat = Seat("10.9.9.9")
                assert await dead.arrive(seat) is None
                assert await dead.authenticate(seat, "u1") is None
            assert await alive.arrive(Seat("10.9.9.9")) is None
            late = Seat("10.9.9.9")
            assert await alive.arrive(late) is None
            assert await alive.authenticate(late, "u1") == (
                "QuotaExceeded: at most 2 open sockets per user"
            )
            # The first process stops renewing (it died, its sockets never left).
            assert dead._renewal._task is not None
            dead._renewal._task.cancel()
            await asyncio.sleep(1.5)
            seat = Seat("10.9.9.8")
            assert await alive.arrive(seat) is None
            assert await alive.authenticate(seat, "u1") is None
        finally:
            dead.open.clear()
            await dead.close()
            await alive.close()
