"""The feed's safety net against lost wake-ups, one per process instead of one per reader.

A waiting reader (a long-poll, a subscription) is woken by the signal of the unit of work that
recorded a matching event. That signal may be lost (Redis restarting, a unit opened without
the hook, a process killed between its commit and the numbering), so the log is re-read now
and then. Re-reading it once per reader and second cost 200 open run pages 400 reads a second
whether or not anything happened; here one task per process, every `interval` seconds while
readers wait, numbers what was left unnumbered, reads the log's end and, when it moved, one
row per type and run of what was numbered since (`EventRepository.digest`), and wakes only
the readers one of those rows concerns and who have not read past it. A lost signal still
costs a reader at most about `interval` seconds; a reader whose wake-up was not lost is not
woken twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger("calcgraph.events")

Digest = list[tuple[str, str | None, int]]
"""(type, run or None, last position) of the events numbered in a range."""


@dataclass(eq=False)
class Reader:
    matches: Callable[[str], bool]
    run: str | None
    event: asyncio.Event
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    seen: int = -1
    """The log's end when the reader last read (every event up to it was considered)."""

    def concerned(self, by_type: dict[str, int], by_run: dict[str, dict[str, int]]) -> bool:
        """Whether an event of the digest past `seen` matches the reader's filter."""
        rows = by_type if self.run is None else by_run.get(self.run, {})
        return any(last > self.seen and self.matches(t) for t, last in rows.items())


def index(digest: Digest) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The digest by type (any run), and by run then type: the last position of each."""
    by_type: dict[str, int] = {}
    by_run: dict[str, dict[str, int]] = {}
    for type_, run, last in digest:
        by_type[type_] = max(by_type.get(type_, 0), last)
        if run is not None:
            of_run = by_run.setdefault(run, {})
            of_run[type_] = max(of_run.get(type_, 0), last)
    return by_type, by_run


class Watch:
    """`number()` numbers events left unnumbered; `end()` reads the log's end; `digest(a, b)`
    the rows of (a, b]. `interval` is read at each round (a test may lengthen it)."""

    def __init__(
        self,
        number: Callable[[], Awaitable[None]],
        end: Callable[[], Awaitable[int]],
        digest: Callable[[int, int], Awaitable[Digest]],
        interval: Callable[[], float],
    ) -> None:
        self._number = number
        self._end = end
        self._digest = digest
        self._interval = interval
        self.readers: set[Reader] = set()
        self._task: asyncio.Task[None] | None = None

    @contextmanager
    def reading(
        self, matches: Callable[[str], bool], run: str | None, event: asyncio.Event
    ) -> Iterator[Reader]:
        reader = Reader(matches, run, event)
        self.readers.add(reader)
        task = self._task
        if task is None or task.done() or task.get_loop() is not reader.loop:
            self._task = reader.loop.create_task(self._watch())
        try:
            yield reader
        finally:
            self.readers.discard(reader)

    async def _watch(self) -> None:
        while self.readers:
            await asyncio.sleep(self._interval())
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: the next round tries again
                log.warning("events re-check failed: %s", exc)

    async def round(self) -> None:
        readers = [r for r in self.readers if r.seen >= 0]
        if not readers:
            return
        await self._number()
        end = await self._end()
        behind = [r for r in readers if r.seen < end]
        if not behind:
            return
        by_type, by_run = index(await self._digest(min(r.seen for r in behind), end))
        for reader in behind:
            if reader.concerned(by_type, by_run):
                reader.loop.call_soon_threadsafe(reader.event.set)
            else:
                reader.seen = max(reader.seen, end)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
