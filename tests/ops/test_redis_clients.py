"""Every Redis client is built in one place (`ops.redis_clients`), with what its connections
share found once."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
import redis.utils

from calcgraph.ops.redis_clients import async_client

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL_OPS", "redis://127.0.0.1:6379/12")


async def test_a_burst_of_new_connections_looks_the_library_version_up_once_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """redis-py 7+ looks its own version up in the installed distributions for each new
    connection unless told (6-300 ms of the event loop each, seen in the soak of issue 27
    whenever a burst grew a pool)."""
    looked: list[int] = []
    version = redis.utils.get_lib_version

    def counted() -> Any:
        looked.append(1)
        return version()

    monkeypatch.setattr(redis.utils, "get_lib_version", counted)
    client = async_client(REDIS_URL)
    try:
        await asyncio.gather(*(client.ping() for _ in range(12)))
        pool = client.connection_pool
        opened = len(pool._available_connections) + len(pool._in_use_connections)
    finally:
        await client.aclose()
    assert opened > 1, "the burst opened several connections"
    assert len(looked) <= 1
