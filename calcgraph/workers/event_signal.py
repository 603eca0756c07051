"""The unit-of-work hook that tells waiting event readers (the long-poll, the `events`
subscription) that a committed unit recorded events: in this process at once, and through
Redis in every other one. Joined to every database whose units may record events."""

from __future__ import annotations

import asyncio
from typing import Any

from calcgraph.db.engine import Database
from calcgraph.domain.events.signal import collecting
from calcgraph.workers.notify import Notifier, RedisNotifier


class EventSignal:
    """A `UnitHook`: after a commit that recorded an event, `notifier.publish_events()`."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    def begin(self) -> Any:
        manager = collecting()
        return manager, manager.__enter__()

    async def committed(self, state: Any) -> None:
        _, marks = state
        if not marks:
            return
        if isinstance(self.notifier, RedisNotifier):
            # A blocking publish: off the event loop (a Redis that does not answer holds a
            # thread, not every request).
            await asyncio.to_thread(self.notifier.publish_events)
        else:
            self.notifier.publish_events()

    def end(self, state: Any) -> None:
        manager, _ = state
        manager.__exit__(None, None, None)


def attach_signal(database: Database, notifier: Notifier) -> None:
    """Give `database`'s write sessions the hook (replacing an earlier one)."""
    database.unit_hooks[:] = [h for h in database.unit_hooks if not isinstance(h, EventSignal)]
    database.unit_hooks.append(EventSignal(notifier))
