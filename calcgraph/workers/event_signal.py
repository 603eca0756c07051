"""The unit-of-work hook that numbers the events a unit recorded and tells the waiting
event readers (the long-poll, the `events` subscription, the webhook dispatcher) once it has
committed.

The unit's events are held until its last statement, which writes them with their
positions (`EventRepository.insert_numbered`: one statement on PostgreSQL, the sequencer's
row locked to the commit; they were an insert, an advisory lock and a numbering statement):
they commit with their positions, so the wake-up goes out right after the commit, with no
numbering transaction of its own between them (that transaction, queued on the lock behind
the other units' and on the pool, was most of the delay from a job's end to a long-poll's
answer). The
readers are woken in this process at once (the notifier's local listeners and the
`observers` of this module), and through Redis in every other one. A woken reader finds the
events numbered and only reads: 200 readers woken by one event cost 200 reads, not 200
writes queued on the sequencer's lock. Events recorded by a unit without this hook are
numbered by the readers' re-check (`calcgraph.domain.events.feed.service`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.engine import CollectingHook, Database
from calcgraph.domain.events.service import event_service
from calcgraph.domain.events.signal import HELD, Marks, collecting
from calcgraph.workers.notify import Notifier

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


class EventSignal(CollectingHook):
    """A `UnitHook`: a unit that recorded an event numbers it before its commit, then, once
    committed, `notifier.announce_events(types, runs)` (the types recorded and the runs their
    events belong to: a reader whose filter matches none of the types, or a reader of one
    run that is none of the runs, is not woken). It runs after the run changes
    (`attach_run_changes` goes ahead of it), so what a woken reader does next (a tick) sees
    everything the unit changed, run tokens included; and before the outbox's sends
    (`attach_signal` goes ahead of a hook that `sends_messages`), which a reader does not
    need: a worker's unit that ended a job and queued the next waited for the Dramatiq send,
    a thread's round trip to Redis, before its wake-up left."""

    wakes_readers = True

    def __init__(self, database: Database, notifier: Notifier) -> None:
        self.database = database
        self.notifier = notifier

    def collect(self) -> AbstractContextManager[Marks]:
        return collecting()

    def opened(self, session: AsyncSession, state: Any) -> None:
        _, marks = state
        session.info[HELD] = marks  # the unit's events are held for `before_commit`

    async def before_commit(self, session: AsyncSession, state: Any) -> None:
        _, marks = state
        # The sequencer's advisory lock before the cursor's row, as `sequence` takes them.
        if marks.unheld:
            await event_service.sequence_all(session)
        if marks.rows:
            await event_service.write_numbered(session, marks.rows)

    async def committed(self, state: Any) -> None:
        _, marks = state
        if not marks:
            return
        _tell_observers()
        await self.notifier.announce_events(frozenset(marks.types), frozenset(marks.runs))


def attach_signal(database: Database, notifier: Notifier) -> None:
    """Give `database`'s write sessions the hook (replacing an earlier one), last but ahead
    of the outbox (a hook that `sends_messages`), whichever was attached first."""
    hooks = database.unit_hooks
    hooks[:] = [h for h in hooks if not isinstance(h, EventSignal)]
    sending = [i for i, h in enumerate(hooks) if getattr(h, "sends_messages", False)]
    hooks.insert(sending[0] if sending else len(hooks), EventSignal(database, notifier))
