"""The unit-of-work hook that tells waiting event readers (the long-poll, the `events`
subscription, the webhook dispatcher) that a committed unit recorded events.

After such a commit the hook numbers the events at once (`EventService.sequence`, one short
unit of its own, shared by the units of this process that committed meanwhile), then wakes
the readers: in this process at once (the notifier's local listeners and the `observers` of
this module), and through Redis in every other one. A woken
reader finds the events numbered and only reads: 200 readers woken by one event cost 200
reads, not 200 writes queued on the sequencer's lock. A sequencing that fails (the database
went away just after the commit) wakes nobody: readers number what they find when their
re-check comes (`calcgraph.domain.events.feed.service`)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from calcgraph.db.engine import Database
from calcgraph.domain.events.service import event_service
from calcgraph.domain.events.signal import collecting
from calcgraph.workers.notify import Notifier, RedisNotifier

log = logging.getLogger("calcgraph.events")

_observers: list[Callable[[], None]] = []
_observers_lock = threading.Lock()


def observe(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` (from any thread, it must not block) after every unit of this process
    that recorded events has committed and numbered them; returns the function that stops it."""
    with _observers_lock:
        _observers.append(callback)

    def stop() -> None:
        with _observers_lock:
            if callback in _observers:
                _observers.remove(callback)

    return stop


def _tell_observers() -> None:
    with _observers_lock:
        callbacks = list(_observers)
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("an event observer failed")


class _Rounds:
    """Numbering rounds of one event loop, shared by the units that committed events: a unit
    returns once a round that began after its commit has numbered (so it numbered that unit's
    events), and the units that commit while a round runs share the next one. Under
    concurrent commits (a worker's threads ending jobs, a server's ticks) one numbering
    transaction serves several units, not one each. Each round is led by one of the units it
    serves, in that unit's own task (a lone unit leads its own round at once, as before)."""

    def __init__(self, number: Callable[[], Awaitable[None]]) -> None:
        self._number = number
        self._next: asyncio.Future[None] | None = None
        self._running = False
        self._idle = asyncio.Event()
        self._idle.set()

    async def after_commit(self) -> None:
        """Return once a round that began after this call has numbered (raises its error)."""
        if self._running:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            mine = self._next
        else:
            mine = asyncio.get_running_loop().create_future()
        while not mine.done():
            if self._running:
                await self._idle.wait()
                continue
            if self._next is mine:
                self._next = None
            await self._lead(mine)
        mine.result()

    async def _lead(self, done: asyncio.Future[None]) -> None:
        """One round, for the units waiting on `done`; cancelled, `done` stays open and one
        of its other units leads it."""
        self._running = True
        self._idle.clear()
        try:
            await self._number()
        except Exception as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)
        finally:
            self._running = False
            self._idle.set()


class EventSignal:
    """A `UnitHook`: after a commit that recorded an event, number it, then
    `notifier.publish_events(types, runs)` (the types recorded and the runs their events
    belong to: a reader whose filter matches none of the types, or a reader of one run that
    is none of the runs, is not woken). It runs after the unit's other hooks (`attach_signal`
    appends it last; `attach_run_changes` goes ahead of it): what a woken reader does next (a
    tick) sees everything the unit changed, run tokens included."""

    wakes_readers = True

    def __init__(self, database: Database, notifier: Notifier) -> None:
        self.database = database
        self.notifier = notifier
        self._rounds: dict[asyncio.AbstractEventLoop, _Rounds] = {}
        self._rounds_lock = threading.Lock()  # the API's loop and a worker runtime's

    async def _number(self) -> None:
        async with self.database.write_session() as session:
            await event_service.sequence(session)

    def _rounds_here(self) -> _Rounds:
        loop = asyncio.get_running_loop()
        with self._rounds_lock:
            rounds = self._rounds.get(loop)
            if rounds is None:
                for other in [lp for lp in self._rounds if lp.is_closed()]:
                    del self._rounds[other]
                rounds = self._rounds[loop] = _Rounds(self._number)
            return rounds

    def begin(self) -> Any:
        manager = collecting()
        return manager, manager.__enter__()

    async def committed(self, state: Any) -> None:
        _, marks = state
        if not marks:
            return
        try:
            await self._rounds_here().after_commit()
        except Exception as exc:
            # Committed all the same: the readers' re-check numbers them within a second.
            log.warning("events committed but not numbered yet: %s", exc)
            return
        _tell_observers()
        if isinstance(self.notifier, RedisNotifier):
            # A blocking publish: off the event loop (a Redis that does not answer holds a
            # thread, not every request).
            await asyncio.to_thread(
                self.notifier.publish_events, frozenset(marks.types), frozenset(marks.runs)
            )
        else:
            self.notifier.publish_events(frozenset(marks.types), frozenset(marks.runs))

    def end(self, state: Any) -> None:
        manager, _ = state
        manager.__exit__(None, None, None)


def attach_signal(database: Database, notifier: Notifier) -> None:
    """Give `database`'s write sessions the hook (replacing an earlier one), last."""
    database.unit_hooks[:] = [h for h in database.unit_hooks if not isinstance(h, EventSignal)]
    database.unit_hooks.append(EventSignal(database, notifier))
