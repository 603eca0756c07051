"""The shared ticking loop of `runUpdates` stops between ticks: a subscriber that leaves while a
tick is under way lets that tick commit instead of cancelling its unit of work halfway (which
on SQLite discarded the connection holding the write lock)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from calcgraph.domain.commit_wait.waiting import RunTickers
from calcgraph.domain.runs.views import RunView


def _view(revision: int) -> RunView:
    return RunView(
        id="run",
        workflow_id="w",
        workflow_version_id="v",
        user_id="u",
        status="running",
        inputs={},
        terminal_outputs=None,
        error_message=None,
        first_failed_node_key=None,
        plan_snapshot={},
        revision=revision,
        started_at=datetime.now(UTC),
        completed_at=None,
    )


class _Ticks:
    """A tick that waits for `release` halfway, as a tick's unit of work awaits its database."""

    def __init__(self) -> None:
        self.begun = 0
        self.committed = 0
        self.cancelled = 0
        self.halfway = asyncio.Event()
        self.release = asyncio.Event()
        self.waits = 0

    async def tick(self) -> RunView:
        self.begun += 1
        self.halfway.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.committed += 1
        return _view(self.committed)

    async def wait(self, seconds: float) -> None:
        self.waits += 1
        await asyncio.sleep(seconds)


async def test_a_subscriber_leaving_mid_tick_lets_the_tick_commit() -> None:
    tickers, ticks = RunTickers(), _Ticks()
    async with tickers.subscribe("run", 0.01, ticks.tick, ticks.wait):
        await asyncio.wait_for(ticks.halfway.wait(), 10)
    # The last subscriber left while the tick was halfway: it goes on to its commit.
    ticks.release.set()
    for _ in range(100):
        if ticks.committed:
            break
        await asyncio.sleep(0.01)
    assert (ticks.begun, ticks.committed, ticks.cancelled) == (1, 1, 0)
    # And the loop ended there: no wait, no further tick.
    await asyncio.sleep(0.05)
    assert (ticks.begun, ticks.waits) == (1, 0)


async def test_a_subscriber_leaving_while_the_loop_waits_ends_it_at_once() -> None:
    tickers, ticks = RunTickers(), _Ticks()
    ticks.release.set()
    async with tickers.subscribe("run", 60, ticks.tick, ticks.wait) as updates:
        first = await asyncio.wait_for(updates.get(), 10)
        assert first is not None
        assert first.revision == 1
    await asyncio.sleep(0.05)
    # The loop was waiting (60 s) when the subscriber left: it stopped without ticking again.
    assert (ticks.begun, ticks.committed, ticks.waits) == (1, 1, 1)
    async with tickers.subscribe("run", 60, ticks.tick, ticks.wait) as updates:
        # A new subscriber starts a new loop, which ticks at once.
        assert (await asyncio.wait_for(updates.get(), 10)) is not None
    assert tickers.started == 2
