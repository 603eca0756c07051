"""Waiting without busy polling, holding no transaction: for a job just submitted (an execute
call), for any job of a run to finish (a long-poll tick), and the shared ticking loops of the
`runUpdates` subscription. All through the job completion notifications (`ports`). Pure: the
reads are the caller's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.commit_wait.ports import Notifications
from calcgraph.domain.errors import DomainError, Unauthenticated
from calcgraph.domain.jobs.views import TERMINAL, JobView
from calcgraph.domain.runs.state import RUN_TERMINAL
from calcgraph.domain.runs.views import RunView

log = logging.getLogger("calcgraph.execution")
# A notification can be lost (a Redis reconnect): the job store is re-read this often anyway.
_RECHECK_SECONDS = 1.0


async def wait_for_job(
    notifier: Notifications,
    job_id: str,
    seconds: float,
    read: Callable[[], Awaitable[JobView]],
    *,
    fresh: bool = False,
) -> JobView:
    """The job once it is finished, or as it is when `seconds` have passed.

    `fresh`: the caller submitted the job just now (after the notifier's subscription, when
    it is steady), so its notification cannot have been missed: the first read waits for it
    instead of reading at once, one query less per execute call. A lost notification still
    costs only the first backoff, as it does later on."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    async with notifier.listen(job_id) as event:
        view = None if fresh and notifier.steady() else await read()
        backoff = 0.05
        while view is None or view.status not in TERMINAL:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), min(remaining, backoff))
            except TimeoutError:
                backoff = min(backoff * 2, 1.0)
            else:
                event.clear()  # a wake-up that finds the job unfinished must not spin
            view = await read()
        return view if view is not None else await read()


Unfinished = Callable[[], Awaitable[list[str] | None]]
"""Jobs a run's running nodes wait on, or None when a tick has something to do now (a job
already finished) or nothing to wait for (no node is running)."""


def unfinished(jobs: list[tuple[str, str]]) -> list[str] | None:
    """`Unfinished`'s answer from the run's running jobs (id, status)."""
    pending = [job_id for job_id, status in jobs if status not in TERMINAL]
    if not jobs or len(pending) < len(jobs):
        return None
    return pending


async def wait_for_run(notifier: Notifications, read: Unfinished, seconds: float) -> None:
    """Return as soon as a job of the run has finished, or when `seconds` have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    pending = await read()
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
        pending = await read()


Tick = Callable[[], Awaitable[RunView]]
"""Advance the run one tick in its own unit of work and answer it."""
Wait = Callable[[float], Awaitable[None]]
"""Sleep up to the given seconds, less when a job of the run finishes first."""


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[RunView | None]
    interval: float
    tick: Tick
    wait: Wait


class _Loop:
    """The ticking loop of one run, with its subscribers. It ticks and waits on behalf of the
    oldest subscriber still there: each subscriber's caller acts for itself, so one whose
    token expired (contract 8b) stops acting when it leaves, and the next caller takes over."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.subscribers: list[_Subscriber] = []
        self.last: RunView | None = None
        self.task: asyncio.Task[None] | None = None
        self.ticking = False
        self.stopped = False

    def push(self, view: RunView | None) -> None:
        for subscriber in self.subscribers:
            subscriber.queue.put_nowait(view)

    def stop(self) -> None:
        """End the loop between two ticks: now if it waits, else once its tick is committed.
        A tick cancelled mid-way loses its unit of work, and on SQLite its connection is
        discarded holding the write lock until rolled back."""
        self.stopped = True
        if self.task is not None and not self.ticking:
            self.task.cancel()

    async def run(self) -> None:
        while not self.stopped and self.subscribers:
            acting = self.subscribers[0]
            self.ticking = True
            try:
                view = await acting.tick()
            except Unauthenticated:
                # The acting subscriber's token expired: it hears so and leaves; the next
                # subscriber's caller acts from the next round.
                if acting in self.subscribers:
                    self.subscribers.remove(acting)
                acting.queue.put_nowait(None)
                continue
            except DomainError:
                return  # the run vanished from the subscriber's sight: end the stream
            except Exception:
                # A busy database or a lost connection: the next round retries.
                log.exception("tick of run %s failed; retrying", self.run_id)
            else:
                if self.last is None or view.revision != self.last.revision:
                    self.last = view
                    self.push(view)
                if view.status in RUN_TERMINAL:
                    return
            finally:
                self.ticking = False
            if self.stopped or not self.subscribers:
                return
            every = min(s.interval for s in self.subscribers)
            await self.subscribers[0].wait(every)


class RunTickers:
    """At most one ticking loop per run in this process, shared by every subscriber of the run
    (`runUpdates`). The loop ticks, pushes each state whose revision changed, then waits for
    the shortest interval its subscribers asked for, or less when a job of the run finishes
    first; it stops when the run is terminal or its last subscriber leaves (between ticks:
    a tick under way is committed first)."""

    def __init__(self) -> None:
        self._loops: dict[str, _Loop] = {}
        self.started = 0
        """Loops started so far in this process (observability, and the sharing test)."""

    @contextlib.asynccontextmanager
    async def subscribe(
        self, run_id: str, interval: float, tick: Tick, wait: Wait
    ) -> AsyncIterator[asyncio.Queue[RunView | None]]:
        queue: asyncio.Queue[RunView | None] = asyncio.Queue()
        subscriber = _Subscriber(queue, interval, tick, wait)
        loop = self._loops.get(run_id)
        fresh = loop is None
        if loop is None:
            loop = self._loops[run_id] = _Loop(run_id)
        elif loop.last is not None:
            queue.put_nowait(loop.last)  # a late subscriber starts from the current state
        loop.subscribers.append(subscriber)
        if fresh:
            loop.task = asyncio.create_task(self._run(loop))
            self.started += 1
        try:
            yield queue
        finally:
            if subscriber in loop.subscribers:
                loop.subscribers.remove(subscriber)
            if not loop.subscribers:
                loop.stop()
                if self._loops.get(run_id) is loop:
                    del self._loops[run_id]

    async def _run(self, loop: _Loop) -> None:
        try:
            await loop.run()
        finally:
            if self._loops.get(loop.run_id) is loop:
                del self._loops[loop.run_id]
            loop.push(None)


class Updates:
    """A subscriber's states (None: the stream ended) until its caller's token expires: then
    `get` raises Unauthenticated instead of waiting on (contract 8b: no operation runs on an
    expired token; a followed run stops being pushed)."""

    def __init__(self, queue: asyncio.Queue[RunView | None], principal: Principal) -> None:
        self.queue = queue
        self.principal = principal

    async def get(self) -> RunView | None:
        while True:
            self.principal.require_current()
            left = self.principal.seconds_left()
            if left is None:
                view = await self.queue.get()
            else:
                try:
                    view = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    continue
            if view is None:
                self.principal.require_current()  # ended because the token expired
            return view
