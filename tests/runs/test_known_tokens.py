"""Run tokens kept in an API process (`calcgraph.workers.run_changes._Known`): an unchanged
tick's token is read without a round trip to Redis while the process's subscription carries
the marks, and a reader woken by a job's end never meets a token that a mark replaced."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from calcgraph.domain.runs.changes import EVERYTHING
from calcgraph.ops.redis_clients import async_client
from calcgraph.workers.notify import RedisNotifier
from calcgraph.workers.run_changes import RedisRunChanges, _Known
from tests.execution.test_redis import REDIS_URL, _redis_or_skip


class _Process:
    """One API process's notifier and token store, as `Backbone.build` joins them."""

    def __init__(self, prefix: str, max_age: float = 20.0) -> None:
        self.notifier = RedisNotifier(REDIS_URL, prefix)
        self.changes = RedisRunChanges(REDIS_URL, prefix, known_max_age=max_age)
        self.changes.follow(self.notifier)

    async def subscribed(self) -> None:
        async with self.notifier.listen("nothing"):
            pass
        await _until(self.changes.keeping)

    async def close(self) -> None:
        await self.notifier.close()
        await self.changes.close()


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    _redis_or_skip()
    return f"test-{uuid.uuid4().hex[:8]}:"


@pytest.fixture
async def pair(prefix: str) -> AsyncIterator[tuple[_Process, _Process]]:
    """This process (subscribed) and a worker's, run "a" marked (so it has a token)."""
    here, worker = _Process(prefix), _Process(prefix)
    try:
        await worker.changes.mark({EVERYTHING, "a"})
        await here.subscribed()
        yield here, worker
    finally:
        await here.close()
        await worker.close()


async def _until(condition: Callable[[], object], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.01)


async def _marked_then_ended(here: _Process, worker: _Process, runs: set[str]) -> None:
    """The worker's unit: its mark, then its job's end, which wakes a waiter here (as a
    long-polling tick is woken) once the mark's message has come before it."""
    job = uuid.uuid4().hex
    async with here.notifier.listen(job) as ended:
        await worker.changes.mark(runs)
        worker.notifier.publish(job)
        await asyncio.wait_for(ended.wait(), 10)


async def _behind_its_back(prefix: str, run_id: str) -> None:
    """A token changed in Redis without a mark's message: only a read can see it."""
    client = async_client(REDIS_URL)
    try:
        await client.set(f"{prefix}calcgraph:run-changes:{run_id}", "changed-behind")
    finally:
        await client.aclose()


async def test_a_read_token_is_kept_until_a_mark_is_heard_before_the_jobs_end(
    prefix: str, pair: tuple[_Process, _Process]
) -> None:
    here, worker = pair
    first = await here.changes.token("a")
    assert first is not None
    await _behind_its_back(prefix, "a")
    # Kept: answered without reading Redis, which now holds another value.
    assert await here.changes.token("a") == first
    # The worker's unit: its mark, then the job's end (a long-polling tick wakes on it).
    await _marked_then_ended(here, worker, {"a"})
    now = await here.changes.token("a")
    assert now is not None
    assert now != first
    assert now[0] not in (first[0], "changed-behind")
    assert await here.changes.token("b") is None  # never marked: no token, none kept


async def test_nothing_kept_is_served_once_the_subscription_ends(
    prefix: str, pair: tuple[_Process, _Process]
) -> None:
    here, _ = pair
    assert await here.changes.token("a") is not None
    await here.notifier.close()  # the subscription is gone: marks are no longer heard
    await _behind_its_back(prefix, "a")
    token = await here.changes.token("a")
    assert token is not None
    assert token[0] == "changed-behind"


async def test_a_dropped_subscription_serves_nothing_kept_until_redis_confirms_it_again(
    prefix: str, pair: tuple[_Process, _Process]
) -> None:
    """redis-py connects a dropped subscription again by itself, and whatever was published
    in between is lost: kept tokens must not outlive the connection they were kept under."""
    here, worker = pair
    admin = async_client(REDIS_URL)
    try:
        first = await here.changes.token("a")
        name = f"{here.notifier.channel}:subscriber"
        clients = await admin.client_list()
        ids = [c["id"] for c in clients if c.get("name") == name]
        assert len(ids) == 1
        await admin.client_kill_filter(_id=ids[0])
        await _behind_its_back(prefix, "a")  # published nowhere: as if lost in the outage

        async def read_again() -> bool:
            token = await here.changes.token("a")
            return token is not None and token[0] == "changed-behind"

        deadline = time.monotonic() + 10
        while not await read_again():  # kept tokens are kept for 20 s otherwise
            assert time.monotonic() < deadline, "the old token was still served"
            await asyncio.sleep(0.05)
        assert first is not None
        await _until(here.changes.keeping)  # confirmed again: kept anew
        await _marked_then_ended(here, worker, {"a"})
        renewed = await here.changes.token("a")
        assert renewed is not None
        assert renewed[0] not in (first[0], "changed-behind")
    finally:
        await admin.aclose()


async def test_a_mark_of_every_run_and_this_process_own_marks_are_seen_at_once(
    prefix: str,
) -> None:
    here, worker = _Process(prefix), _Process(prefix)
    try:
        await worker.changes.mark({EVERYTHING, "a", "b"})
        await here.subscribed()
        a, b = await here.changes.token("a"), await here.changes.token("b")
        assert a is not None
        assert b is not None
        await here.changes.mark({"a"})  # this process's own: no wait for its message
        assert await here.changes.token("a") == here.changes.marked("a") != a
        await _marked_then_ended(here, worker, {EVERYTHING})
        after = await here.changes.token("b")
        assert after is not None
        assert after[0] == b[0]
        assert after[1] != b[1]
    finally:
        await here.close()
        await worker.close()


async def test_a_kept_token_is_read_again_once_it_is_old(prefix: str) -> None:
    here, worker = _Process(prefix, max_age=0.2), _Process(prefix)
    try:
        await worker.changes.mark({EVERYTHING, "a"})
        await here.subscribed()
        first = await here.changes.token("a")
        await _behind_its_back(prefix, "a")
        assert await here.changes.token("a") == first
        await asyncio.sleep(0.3)
        token = await here.changes.token("a")
        assert token is not None
        assert token[0] == "changed-behind"
    finally:
        await here.close()
        await worker.close()


def test_a_read_asked_before_a_mark_was_heard_is_not_kept() -> None:
    known = _Known(max_age=60)
    assert known.stamp() is None  # not following: nothing is kept
    known.following(True)
    stamp = known.stamp()
    assert stamp is not None
    known.message("a c")  # heard while the read of a was on its way
    known.keep("a", ("old", "e"), stamp)
    known.keep("b", ("b1", "e"), stamp)  # b was not marked meanwhile
    assert known.get("a") is None
    assert known.get("b") == ("b1", "e")
    fresh = known.stamp()
    assert fresh is not None
    known.keep("a", ("new", "e"), fresh)
    assert known.get("a") == ("new", "e")
    known.message(EVERYTHING)
    assert known.get("a") is None
    assert known.get("b") is None
    known.keep("b", ("b1", "e"), fresh)  # asked before every run was marked
    assert known.get("b") is None
    known.following(False)
    known.keep("b", ("b2", "e"), known.stamp() or 0)
    assert known.get("b") is None


def test_a_read_is_not_kept_when_the_marks_since_it_was_asked_are_forgotten() -> None:
    known = _Known(max_age=60)
    known.following(True)
    stamp = known.stamp()
    assert stamp is not None
    for i in range(10_001):  # more runs marked than are remembered: a's mark may be lost
        known.message(f"r{i}")
    known.keep("a", ("old", "e"), stamp)
    assert known.get("a") is None
