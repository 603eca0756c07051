"""The production shape for event tests: Redis as the broker and one separate `calcgraph
worker` process (tests/execution/test_canary_workers.py's `redis-1-worker`), with the API's
event feed re-checking less often than a long-poll waits, so that a poll which answers an
event was woken by that event's signal (through Redis or in this process), not by its
fallback re-check."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from calcgraph.domain.events.feed.service import EventFeed
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform
from tests.execution.test_canary_workers import SHAPES

WAIT = 30.0
"""A long-poll's wait (the most allowed): a poll woken by nothing answers when it ends, with
what its last read found."""
WOKEN_WITHIN = 10.0
"""Generous (behaviour, not speed): from the change's answer to the poll's."""


@contextlib.asynccontextmanager
async def redis_worker(
    url: str, idp: LocalIdentityProvider, tmp_path: Path, **settings: Any
) -> AsyncIterator[Platform]:
    factory, processes = SHAPES["redis-1-worker"]
    async with factory(url, idp, tmp_path, processes, **settings) as platform:
        assert not platform.execution.in_process
        feed = platform.app.state.services.events
        assert isinstance(feed, EventFeed)
        feed.recheck = 10 * WAIT  # only a signal wakes a waiting poll
        yield platform


@dataclass
class Poll:
    """A `GET /events?after=now&wait=WAIT` waiting in the API process."""

    task: asyncio.Task[tuple[httpx.Response, float]]
    started: float

    async def answer(self, since: float) -> list[dict[str, Any]]:
        """Its items, asserting it answered 200 within `WOKEN_WITHIN` of `since` (the
        monotonic time the change was answered) and before its wait ended (woken, not timed
        out: a poll whose wait ends answers what its last read found)."""
        assert since < self.started + WAIT - 1.0, "the change took longer than the poll waits"
        response, answered = await self.task
        assert response.status_code == 200, response.text
        assert answered - since < WOKEN_WITHIN, answered - since
        assert answered < self.started + WAIT - 1.0, "the poll was not woken: its wait ended"
        items: list[dict[str, Any]] = response.json()["items"]
        return items


async def waiting_poll(platform: Platform, headers: dict[str, str], **params: Any) -> Poll:
    """Start a long-poll from now and let it begin waiting before the change is made."""

    async def poll() -> tuple[httpx.Response, float]:
        response = await platform.client.get(
            "/events", params={"after": "now", "wait": WAIT, **params}, headers=headers
        )
        return response, time.monotonic()

    started = time.monotonic()
    task = asyncio.create_task(poll())
    await asyncio.sleep(1.0)
    assert not task.done(), task.result()[0].text
    return Poll(task, started)


async def events_since(
    platform: Platform, headers: dict[str, str], after: str | None, **params: Any
) -> list[dict[str, Any]]:
    """What the caller may see after the cursor `after` (None: from the oldest kept)."""
    query = {"limit": 500, **params} if after is None else {"after": after, "limit": 500, **params}
    response = await platform.client.get("/events", params=query, headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def cursor(platform: Platform, headers: dict[str, str]) -> str:
    response = await platform.client.get("/events", params={"after": "now"}, headers=headers)
    assert response.status_code == 200, response.text
    return str(response.json()["next_cursor"])
