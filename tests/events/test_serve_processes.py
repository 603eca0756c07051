"""Several `calcgraph serve --workers` processes: an event recorded in one of them wakes the
long-polls waiting in every one, through Redis, with the fallback re-check off
(`CALCGRAPH_EVENT_RECHECK_SECONDS`), so a poll that answers was woken by the event's signal."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from tests.auth.idp import LocalIdentityProvider
from tests.events.redis_shape import WAIT
from tests.execution.conftest import exec_url, quick_sandbox  # noqa: F401
from tests.ops.test_ratelimit import REDIS_URL, _redis_or_skip
from tests.ops.test_serve_workers import STARTING, _processes, _serve
from tests.ops.test_worker_process import _free_port
from tests.packages.publishing import small_body

pytestmark = pytest.mark.db
POLLS = 6
"""Polls, each on a connection of its own: the processes take turns accepting them."""
ROUNDS = 6


async def test_an_event_in_one_process_wakes_the_polls_of_both(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> None:
    _redis_or_skip()
    prefix = f"serve-events-{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_OIDC_ISSUER": identity_provider.issuer,
        "CALCGRAPH_SANDBOX": quick_sandbox(),
        "CALCGRAPH_LOG_LEVEL": "info",
        "CALCGRAPH_LOG_FORMAT": "json",
        "CALCGRAPH_EVENT_RECHECK_SECONDS": str(10 * WAIT),  # only a signal wakes a poll
    }
    log_path = tmp_path / "serve.log"
    alice = identity_provider.headers("alice")
    fresh = httpx.Limits(max_keepalive_connections=0)
    crossed = False
    try:
        with _serve(env, _free_port(), log_path) as base:
            async with httpx.AsyncClient(
                base_url=base, timeout=STARTING + WAIT, limits=fresh, headers=alice
            ) as http:
                me = await http.get("/auth/me")
                assert me.status_code == 200, me.text
                # The kernel hands each new connection to either process: a round whose polls
                # all landed in the uploading process proves nothing across processes, and
                # another round is made.
                for _ in range(ROUNDS):
                    polled, uploaded = await _round(http, log_path)
                    if polled - {uploaded}:
                        crossed = True
                        break
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
    assert crossed, f"no poll waited in the process that did not upload in {ROUNDS} rounds"


async def _round(http: httpx.AsyncClient, log_path: Path) -> tuple[set[int], int]:
    """`POLLS` long-polls from now, then an upload: every poll answers it before its wait
    ends. Returns the processes that answered the polls and the one that recorded the upload."""
    polls_before = _processes(log_path, "/events")
    uploads_before = _processes(log_path, "/packages")
    # From now, each: the access log then counts the polls alone.
    params: dict[str, str | float] = {
        "after": "now",
        "wait": WAIT,
        "type": "calcgraph.file.uploaded",
    }

    async def poll() -> tuple[httpx.Response, float]:
        response = await http.get("/events", params=params)
        return response, time.monotonic()

    started = time.monotonic()
    polls = [asyncio.create_task(poll()) for _ in range(POLLS)]
    await asyncio.sleep(2.0)
    assert not any(p.done() for p in polls)
    name = f"ev-{uuid.uuid4().hex[:10]}"
    uploaded = await http.post("/packages", json=small_body(name, "1.0.0"))
    assert uploaded.status_code == 201, uploaded.text
    package_id = uploaded.json()["package_id"]
    for response, answered in await asyncio.gather(*polls):
        assert response.status_code == 200, response.text
        assert [e["subject"] for e in response.json()["items"]] == [package_id]
        assert answered < started + WAIT - 1.0, "a poll was not woken: its wait ended"
    await asyncio.sleep(0.5)  # the access log lines are written
    polled = set(_processes(log_path, "/events") - polls_before)
    (uploader,) = set(_processes(log_path, "/packages") - uploads_before)
    return polled, uploader
