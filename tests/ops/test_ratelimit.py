"""Per-caller rate limits: 429 `RateLimited` with `Retry-After` once a caller's burst is spent,
other callers unaffected; in process and through Redis (shared by every API process).

Redis: database 12 at 127.0.0.1:6379 (`CALCGRAPH_TEST_REDIS_URL_OPS` overrides) with a fresh key
prefix per test, deleted afterwards."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import redis
from starlette.applications import Starlette

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.services import services_of
from calcgraph.serving.ratelimit import MemoryLimiter, RedisLimiter
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider

pytestmark = pytest.mark.db

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL_OPS", "redis://127.0.0.1:6379/12")
BURST = 4
CHECK = {"source": "Force", "target": "Numeric"}


def _redis_or_skip() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    _redis_or_skip()
    prefix = f"ops-test-{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(params=["memory", "redis"])
def limited_settings(
    request: pytest.FixtureRequest, database_url: str, identity_provider: LocalIdentityProvider
) -> Settings:
    options: dict[str, Any] = {}
    if request.param == "redis":
        options = {
            "redis_url": REDIS_URL,
            "redis_key_prefix": request.getfixturevalue("redis_prefix"),
        }
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=database_url,
        oidc_issuer=identity_provider.issuer,
        rate_limit_per_minute=6,  # one token every 10 s: none comes back during a test
        rate_limit_burst=BURST,
        **options,
    )


async def _client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    # A remote address: anonymous loopback callers are not limited.
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 40000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://rl.test") as client:
            yield client
    finally:
        limiter = services_of(app).limiter
        assert limiter is not None
        await limiter.close()
        await app.state.execution.close()


@pytest.fixture
async def limited(
    limited_settings: Settings, database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(create_app(limited_settings, database)):
        yield client


def _assert_limited(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["detail"].startswith("RateLimited: ")
    assert 1 <= int(response.headers["retry-after"]) <= 10


async def test_a_user_past_the_burst_gets_429_another_user_does_not(
    limited: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    for _ in range(BURST):
        assert (await limited.get("/jobs", headers=bearer("alice"))).status_code == 200
    refused = await limited.get("/jobs", headers=bearer("alice"))
    _assert_limited(refused)
    assert "user alice" in refused.json()["detail"]
    assert (await limited.get("/jobs", headers=bearer("bob"))).status_code == 200
    metrics = (await limited.get("/metrics")).text
    assert "calcgraph_rate_limited_requests_total 1.0" in metrics


async def test_graphql_shares_the_callers_bucket(
    limited: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    for _ in range(BURST):
        assert (await limited.get("/jobs", headers=bearer("alice"))).status_code == 200
    query = {"query": "{ __typename }"}
    _assert_limited(await limited.post("/graphql", json=query, headers=bearer("alice")))
    assert (await limited.post("/graphql", json=query, headers=bearer("bob"))).status_code == 200


async def test_anonymous_callers_are_limited_by_address(limited: httpx.AsyncClient) -> None:
    for _ in range(BURST):
        response = await limited.post("/types/check-connection", json=CHECK)
        assert response.status_code == 200
    refused = await limited.post("/types/check-connection", json=CHECK)
    _assert_limited(refused)
    assert "address 203.0.113.7" in refused.json()["detail"]


async def test_anonymous_loopback_callers_are_not_limited(
    limited_settings: Settings, database: Database
) -> None:
    app = create_app(limited_settings, database)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://rl.test") as client:
            for _ in range(BURST * 2):
                response = await client.post("/types/check-connection", json=CHECK)
                assert response.status_code == 200
    finally:
        limiter = services_of(app).limiter
        assert limiter is not None
        await limiter.close()
        await app.state.execution.close()


async def test_health_and_metrics_are_exempt(limited: httpx.AsyncClient) -> None:
    for _ in range(BURST * 2):
        assert (await limited.get("/health")).status_code == 200
        assert (await limited.get("/metrics")).status_code == 200


async def test_zero_disables_the_limit(
    database_url: str,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=database_url,
        oidc_issuer=identity_provider.issuer,
        rate_limit_per_minute=0,
        rate_limit_burst=1,
    )
    app = create_app(settings, database)
    assert services_of(app).limiter is None
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rl.test") as client:
        for _ in range(5):
            response = await client.post("/types/check-connection", json=CHECK)
            assert response.status_code == 200


async def test_the_redis_bucket_is_shared_by_api_processes(
    database_url: str,
    database: Database,
    identity_provider: LocalIdentityProvider,
    bearer: Callable[..., dict[str, str]],
    redis_prefix: str,
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=database_url,
        oidc_issuer=identity_provider.issuer,
        redis_url=REDIS_URL,
        redis_key_prefix=redis_prefix,
        rate_limit_per_minute=6,
        rate_limit_burst=BURST,
    )
    first, second = create_app(settings, database), create_app(settings, database)
    async for a in _client(first):
        async for b in _client(second):
            for client in (a, b) * (BURST // 2):
                assert (await client.get("/jobs", headers=bearer("alice"))).status_code == 200
            # Each process answers from its own buckets and syncs them through Redis every
            # second; here the syncs are made at once, in the order that needs both ways.
            limiters = [services_of(app).limiter for app in (first, second, first)]
            for limiter in limiters:
                assert isinstance(limiter, RedisLimiter)
                await limiter.sync()
            _assert_limited(await a.get("/jobs", headers=bearer("alice")))
            _assert_limited(await b.get("/jobs", headers=bearer("alice")))


async def test_the_redis_limiter_answers_without_redis_and_syncs_on_its_own(
    request: pytest.FixtureRequest,
) -> None:
    """A request is answered from the process's buckets, also while Redis is unreachable
    (limited per process then); a sync carries what one process used to another, and each
    limiter syncs on its own in the background."""
    prefix = request.getfixturevalue("redis_prefix")
    down = RedisLimiter("redis://127.0.0.1:1/0", 6, 2, prefix)
    one = RedisLimiter(REDIS_URL, 6, 3, prefix, sync_seconds=0.05)
    two = RedisLimiter(REDIS_URL, 6, 3, prefix, sync_seconds=3600)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert [await down.acquire("k") for _ in range(2)] == [0, 0]
        assert await down.acquire("k") > 0
        await down.sync()  # logs, keeps the count for the next one, raises nothing

        assert await one.acquire("k") == 0
        assert await one.acquire("k") == 0
        for _ in range(400):  # `one` syncs on its own: its two tokens reach Redis
            if client.get(f"{prefix}calcgraph:ratelimit:k") is not None:
                break
            await asyncio.sleep(0.05)
        assert client.get(f"{prefix}calcgraph:ratelimit:k") is not None
        await two.sync()  # learns nothing yet: it has not seen the caller
        assert await two.acquire("k") == 0  # 3 used of 3 in all; `two` does not know it yet
        await two.sync()
        assert await two.acquire("k") > 0
    finally:
        client.close()
        for limiter in (down, one, two):
            await limiter.close()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_tokens_come_back_at_the_rate(kind: str, request: pytest.FixtureRequest) -> None:
    # 60 a minute is one token each second; a burst of 2 lets two through at once. (At 600 a
    # minute a loaded machine let 0.1 s pass between two calls, and a token came back.)
    limiter: MemoryLimiter | RedisLimiter
    if kind == "redis":
        # No sync within the test: what Redis learns comes with its own clock (other tests).
        limiter = RedisLimiter(
            REDIS_URL, 60, 2, request.getfixturevalue("redis_prefix"), sync_seconds=3600
        )
    else:
        limiter = MemoryLimiter(60, 2)
    try:
        assert await limiter.acquire("k") == 0
        assert await limiter.acquire("k") == 0
        wait = await limiter.acquire("k")
        assert 0.5 < wait <= 1.0
        assert await limiter.acquire("other") == 0
        await asyncio.sleep(wait + 0.05)
        assert await limiter.acquire("k") == 0
        assert await limiter.acquire("k") > 0
    finally:
        await limiter.close()


async def test_redis_limiter_takes_a_rate_too_high_to_ever_refuse(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    # A token every 60 ps: the bucket's expiry rounds to 0 ms, which SET ... PX refuses; the
    # script must still answer rather than fail open with a warning.
    limiter = RedisLimiter(REDIS_URL, 1e12, 1, request.getfixturevalue("redis_prefix"))
    try:
        for _ in range(3):
            assert await limiter.acquire("k") == 0
        assert "rate limiting is off" not in caplog.text
    finally:
        await limiter.close()


async def test_memory_limiter_forgets_full_buckets_past_its_size() -> None:
    limiter = MemoryLimiter(6000, 1, max_keys=10)
    for i in range(10):
        assert await limiter.acquire(f"caller-{i}") == 0
    await asyncio.sleep(0.02)  # every bucket is full again (one token per 10 ms)
    assert await limiter.acquire("newcomer") == 0
    assert len(limiter._full_at) == 1
