"""What the event feed needs from the workers' side, as a protocol: the notifier of
`calcgraph/workers/notify.py` satisfies it. Pure."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class EventSignals(Protocol):
    def listen_events(
        self, matches: Callable[[str], bool] | None = None, run: str | None = None
    ) -> AbstractAsyncContextManager[asyncio.Event]:
        """An event set whenever a unit of work that recorded events has committed (in any
        process sharing the backbone), when one of their types `matches` (a signal whose
        types are unknown sets it always) and, with `run`, one of them belongs to that
        workflow run (a signal whose runs are unknown sets it always); the listener clears
        it."""
        ...
