"""Background tasks of a long-lived helper (a Redis syncer, a renewer, a subscriber)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("calcgraph.ops")

RECANCEL_SECONDS = 1.0
"""How long a cancelled task has to end before it is cancelled again."""
STOP_SECONDS = 10.0
"""How long `stop` waits for a task in all before it gives up on it (logged)."""


async def stop(
    task: asyncio.Task[Any] | None,
    *,
    recancel: float = RECANCEL_SECONDS,
    within: float = STOP_SECONDS,
) -> None:
    """Cancel `task` and wait until it has ended, whatever it ended with: a helper closing
    down has no one to report its background task's failure to.

    The wait is bounded. A task that swallows its cancellation (a timeout expiring as it comes
    turns it into the timeout's own error and the task carries on: `asyncio.timeout` before
    Python 3.11.3, which redis-py's reads use) is cancelled again every `recancel` seconds;
    one still running after `within` seconds is left running, with an error naming it, so that
    the helper closes rather than waiting forever. The caller's own cancellation propagates."""
    if task is None:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not task.done():
        task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.error("%r did not end within %.0f s of being cancelled; left running", task, within)
            return
        await asyncio.wait({task}, timeout=min(recancel, left))
    if not task.cancelled():
        task.exception()  # retrieved: not reported again when the task is collected


class Every:
    """A background task that awaits `work()` every `seconds`, on the event loop that first
    `start`s it (a serve process's counts shared through Redis: the rate limiter's sync, the
    socket census's lease renewal), until `stop`."""

    def __init__(self, seconds: float, work: Callable[[], Awaitable[None]]) -> None:
        self.seconds = seconds
        self._work = work
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._every())

    async def _every(self) -> None:
        while True:
            await asyncio.sleep(self.seconds)
            await self._work()

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop(task)
