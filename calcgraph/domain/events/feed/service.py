"""The pull of the event log (`GET /events`, GraphQL `events`) and its push (the `events`
subscription): read a page the caller may see, and with `wait` hold no transaction until an
event is recorded (the signal of `ports.EventSignals`) or the wait ends.

The unit of work that records events numbers them in its own transaction and signals once it
has committed (`calcgraph.workers.event_signal`): a woken reader only reads. A reader numbers
what it finds unnumbered (a unit without the hook) itself only on its first read; where a
signal may have been lost (a Redis reconnect, a unit without the hook, a process killed
between its commit and its signal)
the process's one re-check (`watch.Watch`, every `recheck` seconds while readers wait)
numbers the rest and wakes the readers the events numbered since concern, so a lost signal
costs about `recheck` seconds, a burst of signals costs no write, and a quiet reader costs
nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from calcgraph.db.dialect import is_retryable
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.events.feed.watch import Reader, Watch
from calcgraph.domain.events.ports import EventSignals
from calcgraph.domain.events.service import EventPage, EventQuery, event_service
from calcgraph.domain.events.views import EventView

if TYPE_CHECKING:
    from calcgraph.db.engine import Database

MAX_WAIT = 30.0
RECHECK_SECONDS = 1.0
_RETRY_CAP_S = 30.0
T = TypeVar("T")


async def _patiently(read: Callable[[], Awaitable[T]]) -> T:
    """`read()`, again after the database's `retry_after` while it answers busy (an API
    process's queue is full, contention): a subscription is a stream held open for a page, and
    a moment's overload must not end it. A request (`pull`) is refused instead, and its client
    retries after Retry-After."""
    while True:
        try:
            return await read()
        except Exception as exc:
            if not is_retryable(exc):
                raise
            await asyncio.sleep(min(_RETRY_CAP_S, float(getattr(exc, "retry_after", 1))))


class EventFeed:
    def __init__(
        self, database: Database, signals: EventSignals, recheck: float = RECHECK_SECONDS
    ) -> None:
        self.database = database
        self.signals = signals
        self.recheck = recheck
        self.watch = Watch(self._sequenced, self._end, self._digest, lambda: self.recheck)

    async def close(self) -> None:
        """Stop the re-check (it also stops by itself once no reader waits)."""
        await self.watch.close()

    async def _end(self) -> int:
        async with self.database.read_session() as session:
            return await event_service.end(session)

    async def _digest(self, after: int, upto: int) -> list[tuple[str, str | None, int]]:
        async with self.database.read_session() as session:
            return await event_service.digest(session, after, upto)

    async def _sequenced(self) -> None:
        """Number the events committed so far (a write only when some await it)."""
        async with self.database.read_session() as session:
            pending = await event_service.unsequenced(session)
        if pending:
            async with self.database.write_session() as session:
                await event_service.sequence(session)

    async def start(self, query: EventQuery, principal: Principal) -> int:
        """The position a pull starts after: its cursor, or the current end for `now`.
        NotFound for a `run` the caller may not see (checked here for `now`, else by the
        first page's read, in its session)."""
        if query.after is not None:
            return query.after
        await self._sequenced()
        async with self.database.read_session() as session:
            if query.run is not None:
                await event_service.require_run(session, principal, query.run)
            return await event_service.end(session)

    async def _page(
        self, principal: Principal, query: EventQuery, after: int, reader: Reader, first: bool
    ) -> EventPage:
        """A page after `after`, in one read session; the reader has then seen the log up to
        the end read before the page (every event numbered by then was in reach of it). The
        first read of a pull numbers what it finds unnumbered (a signal may have been lost
        just before it started) and checks the `run` of a pull from a cursor."""
        number = first
        while True:
            async with self.database.read_session() as session:
                if first and query.run is not None and query.after is not None:
                    await event_service.require_run(session, principal, query.run)
                first = False
                end, pending = await event_service.head(session)
                if not (number and pending):
                    # At the log's end nothing is numbered past `after`: the page would be
                    # empty, so it is not read (a follower woken by each unit that recorded
                    # events asks again after each page and finds nothing: in issue 23's flood
                    # about half its reads). The cursor's row and the events it numbers commit
                    # together, so no event at or below `end` is still to come.
                    page = (
                        EventPage([], str(after))
                        if end <= after
                        else await event_service.page(session, principal, query, after, end)
                    )
                    reader.seen = max(reader.seen, end)
                    return page
            async with self.database.write_session() as session:
                await event_service.sequence(session)
            number = False

    async def recent(self, principal: Principal, query: EventQuery) -> EventPage:
        """The newest `query.limit` events of its types the caller may see, newest first."""
        await self._sequenced()
        async with self.database.read_session() as session:
            return await event_service.recent(session, principal, query.types, query.limit)

    async def pull(self, principal: Principal, query: EventQuery, wait: float = 0.0) -> EventPage:
        """A page of events after the query's position; with `wait`, an empty page only when
        nothing the caller may see and the filter matches was recorded within `wait`."""
        after = await self.start(query, principal)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, min(wait, MAX_WAIT))
        first = True
        async with self.signals.listen_events(query.types.matches, query.run) as signal:
            with self.watch.reading(query.types.matches, query.run, signal) as reader:
                while True:
                    page = await self._page(principal, query, after, reader, first)
                    first = False
                    remaining = deadline - loop.time()
                    if page.items or remaining <= 0:
                        return page
                    after = int(page.next_cursor)
                    await self._wait(signal, remaining)

    async def follow(self, principal: Principal, query: EventQuery) -> AsyncIterator[EventView]:
        """Every matching event the caller may see, as it is recorded, from now on (or after
        the query's cursor), until the consumer stops; a busy database delays it, never ends
        it."""
        after = await _patiently(lambda: self.start(query, principal))
        first = True
        async with self.signals.listen_events(query.types.matches, query.run) as signal:
            with self.watch.reading(query.types.matches, query.run, signal) as reader:
                while True:

                    def read(after: int = after, first: bool = first) -> Awaitable[EventPage]:
                        return self._page(principal, query, after, reader, first)

                    page = await _patiently(read)
                    first = False
                    after = int(page.next_cursor)
                    for item in page.items:
                        yield item
                    if len(page.items) >= query.limit:
                        continue  # more are waiting: read on at once
                    await self._wait(signal, MAX_WAIT)

    @staticmethod
    async def _wait(signal: asyncio.Event, seconds: float) -> bool:
        """Until the signal or `seconds`; whether it was the signal."""
        try:
            await asyncio.wait_for(signal.wait(), seconds)
        except TimeoutError:
            return False
        finally:
            signal.clear()
        return True
