"""The event signal names the types a unit recorded: a reader (long-poll, subscription) whose
filter matches none of them is not woken, in this process and through Redis; a signal whose
types are unknown (an older process's) wakes every reader. It wakes them after the unit's run
tokens are renewed, and before its messages are sent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Sequence

import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.events import signal
from calcgraph.domain.events.catalog import parse_types
from calcgraph.domain.jobs.enqueue import Message, enqueue
from calcgraph.domain.runs import changes
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.flush import Outbox
from calcgraph.workers.flush import attach as attach_outbox
from calcgraph.workers.notify import LocalNotifier, RedisNotifier
from calcgraph.workers.run_changes import LocalRunChanges, attach_run_changes
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


class _Renewing(LocalRunChanges):
    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    async def mark(self, run_ids: set[str]) -> None:
        await super().mark(run_ids)
        self.order.append("run token renewed")


class _Waking(LocalNotifier):
    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    async def announce_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        self.order.append("readers woken")
        await super().announce_events(types, runs)


@pytest.mark.db
@pytest.mark.parametrize("signal_first", [True, False], ids=["signal-first", "changes-first"])
async def test_readers_are_woken_after_the_run_tokens_are_renewed(
    database: Database, signal_first: bool
) -> None:
    """A unit that ends a run's job both records its event and changes the run: a page woken
    by the event ticks at once, so the run's token must be renewed before the wake (else the
    tick answers what it kept from before the job ended, and the page waits for nothing),
    whichever hook was attached first (the worker process and the embedded workers)."""
    order: list[str] = []
    hooks = list(database.unit_hooks)
    try:
        attach: list[Callable[[], None]] = [
            lambda: attach_signal(database, _Waking(order)),
            lambda: attach_run_changes(database, _Renewing(order)),
        ]
        for step in attach if signal_first else reversed(attach):
            step()
        async with database.write_session():
            signal.mark("calcgraph.job.succeeded")
            changes.changed("run-1")
        assert order == ["run token renewed", "readers woken"]
    finally:
        database.unit_hooks[:] = hooks


@pytest.mark.db
@pytest.mark.parametrize("outbox_first", [True, False], ids=["outbox-first", "signal-first"])
async def test_readers_are_woken_before_the_units_messages_are_sent(
    database: Database, outbox_first: bool
) -> None:
    """A worker's unit that ends a job often queues the next one too: its readers need the
    committed event, not the message, so they are not kept waiting for the send (a blocking
    round trip to Redis in a thread), whichever hook was attached first."""
    order: list[str] = []
    hooks = list(database.unit_hooks)

    def sent(messages: Sequence[Message]) -> int:
        order.append("message sent")
        return 0

    try:
        attach: list[Callable[[], object]] = [
            lambda: attach_outbox(database, Outbox(lambda m: None, sent, off_loop=True)),
            lambda: attach_signal(database, _Waking(order)),
        ]
        for step in attach if outbox_first else reversed(attach):
            step()
        async with database.write_session():
            signal.mark("calcgraph.job.succeeded")
            enqueue("sandbox.run", job_id="j1")
        assert order == ["readers woken", "message sent"]
    finally:
        database.unit_hooks[:] = hooks
