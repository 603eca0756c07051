"""Driving runs without busy polling: the long-poll of a tick (wait until a job of the run
finishes, through the job completion notifications of `notify`, holding no transaction), and
the shared ticking loops of the `runUpdates` subscription."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import DomainError
from calcgraph.domain.jobs.execution.service import TERMINAL
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.state import RUN_TERMINAL
from calcgraph.domain.runs.views import RunView
from calcgraph.workers.notify import Notifier

log = logging.getLogger("calcgraph.workers.runs")
# A notification can be lost (a Redis reconnect): the job store is re-read this often anyway.
_RECHECK_SECONDS = 1.0
DEFAULT_INTERVAL_SECONDS = 2.0
"""The specification's polling period of a run page."""


async def _unfinished(database: Database, principal: Principal, run_id: str) -> list[str] | None:
    """Jobs the run's running nodes wait on, or None when a tick has something to do now
    (a job already finished) or nothing to wait for (no node is running)."""
    async with database.read_session() as session:
        jobs = await run_service.running_jobs(session, principal, run_id)
    pending = [job_id for job_id, status in jobs if status not in TERMINAL]
    if not jobs or len(pending) < len(jobs):
        return None
    return pending


async def wait_for_run(
    database: Database, notifier: Notifier, principal: Principal, run_id: str, seconds: float
) -> None:
    """Return as soon as a job of the run has finished, or when `seconds` have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    pending = await _unfinished(database, principal, run_id)
    while pending is not None:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        async with contextlib.AsyncExitStack() as stack:
            # A job that finished between the read and `listen` still wakes us: the notifier
            # remembers recently finished jobs; the periodic re-read covers a lost message.
            events = [await stack.enter_async_context(notifier.listen(j)) for j in pending]
            waiters = [asyncio.ensure_future(event.wait()) for event in events]
            try:
                done, _ = await asyncio.wait(
                    waiters,
                    timeout=min(remaining, _RECHECK_SECONDS),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                for waiter in waiters:
                    waiter.cancel()
            if done:
                return
        pending = await _unfinished(database, principal, run_id)


class _Loop:
    def __init__(self) -> None:
        self.queues: list[asyncio.Queue[RunView | None]] = []
        self.intervals: list[float] = []
        self.last: RunView | None = None
        self.task: asyncio.Task[None] | None = None

    def push(self, view: RunView | None) -> None:
        for queue in self.queues:
            queue.put_nowait(view)


class RunTickers:
    """At most one ticking loop per run in this process, shared by every subscriber of the run
    (`runUpdates`). The loop ticks, pushes each state whose revision changed, then waits for
    the shortest interval its subscribers asked for, or less when a job of the run finishes
    first; it stops when the run is terminal or its last subscriber leaves."""

    def __init__(self) -> None:
        self._loops: dict[str, _Loop] = {}
        self.started = 0
        """Loops started so far in this process (observability, and the sharing test)."""

    @contextlib.asynccontextmanager
    async def subscribe(
        self,
        run_id: str,
        interval: float,
        tick: Callable[[], Awaitable[RunView]],
        wait: Callable[[float], Awaitable[None]],
    ) -> AsyncIterator[asyncio.Queue[RunView | None]]:
        queue: asyncio.Queue[RunView | None] = asyncio.Queue()
        loop = self._loops.get(run_id)
        if loop is None:
            loop = self._loops[run_id] = _Loop()
            loop.task = asyncio.create_task(self._run(run_id, loop, tick, wait))
            self.started += 1
        elif loop.last is not None:
            queue.put_nowait(loop.last)  # a late subscriber starts from the current state
        loop.queues.append(queue)
        loop.intervals.append(interval)
        try:
            yield queue
        finally:
            loop.queues.remove(queue)
            loop.intervals.remove(interval)
            if not loop.queues:
                if loop.task is not None:
                    loop.task.cancel()
                if self._loops.get(run_id) is loop:
                    del self._loops[run_id]

    async def _run(
        self,
        run_id: str,
        loop: _Loop,
        tick: Callable[[], Awaitable[RunView]],
        wait: Callable[[float], Awaitable[None]],
    ) -> None:
        try:
            while True:
                try:
                    view = await tick()
                except DomainError:
                    break  # the run vanished from the subscriber's sight: end the stream
                except Exception:
                    # A busy database or a lost connection: the next round retries.
                    log.exception("tick of run %s failed; retrying", run_id)
                else:
                    if loop.last is None or view.revision != loop.last.revision:
                        loop.last = view
                        loop.push(view)
                    if view.status in RUN_TERMINAL:
                        break
                await wait(min(loop.intervals, default=DEFAULT_INTERVAL_SECONDS))
        finally:
            if self._loops.get(run_id) is loop:
                del self._loops[run_id]
            loop.push(None)


run_tickers = RunTickers()
