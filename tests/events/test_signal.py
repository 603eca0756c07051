"""The event signal names the types a unit recorded: a reader (long-poll, subscription) whose
filter matches none of them is not woken, in this process and through Redis; a signal whose
types are unknown (an older process's) wakes every reader. It wakes them after the unit's run
tokens are renewed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection

import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.events import signal
from calcgraph.domain.events.catalog import parse_types
from calcgraph.domain.runs import changes
from calcgraph.workers.event_signal import _Rounds, attach_signal
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

    def publish_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        self.order.append("readers woken")
        super().publish_events(types, runs)


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
        attach = [
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


# --- numbering rounds shared by the units that commit meanwhile ---


async def test_every_unit_returns_only_once_a_round_begun_after_its_commit_numbered_it() -> None:
    committed: list[int] = []
    numbered: set[int] = set()
    rounds_seen: list[set[int]] = []

    async def number() -> None:
        seen = set(committed)  # the round's snapshot: what had committed when it began
        rounds_seen.append(seen)
        await asyncio.sleep(0.01)  # the numbering transaction
        numbered.update(seen)

    rounds = _Rounds(number)

    async def unit(i: int) -> None:
        await asyncio.sleep(0.001 * (i % 7))
        committed.append(i)
        await rounds.after_commit()
        assert i in numbered, (i, rounds_seen)

    await asyncio.gather(*(unit(i) for i in range(40)))
    assert numbered == set(range(40))
    assert len(rounds_seen) < 40  # shared: not one numbering transaction per unit
    await rounds.after_commit()  # alone: a round of its own at once
    assert len(rounds_seen) <= 40


async def test_a_failed_round_fails_its_waiters_and_the_next_round_runs() -> None:
    calls: list[int] = []

    async def number() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database went away")

    rounds = _Rounds(number)
    with pytest.raises(RuntimeError, match="went away"):
        await rounds.after_commit()
    await rounds.after_commit()
    assert len(calls) == 2


async def test_a_lone_unit_numbers_in_its_own_task() -> None:
    """A unit that holds something only its own task may take again (a test's turn on its
    connection) must not wait on a round run by another task."""
    tasks: list[asyncio.Task[object] | None] = []

    async def number() -> None:
        tasks.append(asyncio.current_task())

    rounds = _Rounds(number)
    await rounds.after_commit()
    assert tasks == [asyncio.current_task()]
