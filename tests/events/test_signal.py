"""The event signal names the types a unit recorded: a reader (long-poll, subscription) whose
filter matches none of them is not woken, in this process and through Redis; a signal whose
types are unknown (an older process's) wakes every reader."""

from __future__ import annotations

import asyncio
import uuid

from calcgraph.domain.events.catalog import parse_types
from calcgraph.workers.notify import LocalNotifier, RedisNotifier
from tests.execution.test_redis import REDIS_URL, _redis_or_skip

RUNS = parse_types(["calcgraph.run.*"]).matches
JOBS = parse_types(["calcgraph.job.succeeded"]).matches


async def test_in_process_readers_wake_for_their_types_only() -> None:
    notifier = LocalNotifier()
    async with notifier.listen_events(RUNS) as runs, notifier.listen_events(JOBS) as jobs:
        notifier.publish_events({"calcgraph.job.succeeded", "calcgraph.calculation.started"})
        await asyncio.wait_for(jobs.wait(), 5)
        await asyncio.sleep(0)
        assert not runs.is_set()
        jobs.clear()
        notifier.publish_events(None)
        await asyncio.wait_for(runs.wait(), 5)
        await asyncio.wait_for(jobs.wait(), 5)


async def test_through_redis_readers_wake_for_their_types_only() -> None:
    _redis_or_skip()
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    listener, publisher = RedisNotifier(REDIS_URL, prefix), RedisNotifier(REDIS_URL, prefix)
    try:
        # `runs` registers first: a wake that set it would have done so before `jobs`.
        async with listener.listen_events(RUNS) as runs, listener.listen_events(JOBS) as jobs:
            await asyncio.to_thread(publisher.publish_events, {"calcgraph.job.succeeded"})
            await asyncio.wait_for(jobs.wait(), 10)
            await asyncio.sleep(0)
            assert not runs.is_set()
            # An older process's signal ("1"): every reader wakes.
            jobs.clear()
            await asyncio.to_thread(publisher._publisher.publish, listener.events_channel, "1")
            await asyncio.wait_for(runs.wait(), 10)
            await asyncio.wait_for(jobs.wait(), 10)
    finally:
        await listener.close()
        await publisher.close()
