"""Background tasks of a long-lived helper (a Redis syncer, a renewer, a subscriber)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def stop(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` and wait until it has ended, whatever it ended with: a helper closing
    down has no one to report its background task's failure to."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
