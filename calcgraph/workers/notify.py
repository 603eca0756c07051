"""Job completion notifications, so an execute call waits for its job without polling the
database every millisecond and without holding a transaction.

Workers `publish(job_id)` after the commit that recorded the result. The API side `listen`s
(the `Notifications` port of `calcgraph.domain.commit_wait`):
in-process through thread-safe callbacks into the waiting event loop, with Redis through one
pub/sub subscription per API process. A waiter re-reads the job after each wake-up and, as a
safety net for a lost notification, at a backoff of at most one second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any, Protocol

from calcgraph.ops import tasks
from calcgraph.ops.redis_clients import DownWarning, LoopClients

log = logging.getLogger("calcgraph.workers.notify")
_RECENT = 10_000
_STEADY_AFTER_S = 1.0
_RESUBSCRIBE_S = 0.5
_MAX_TYPES = 50
"""An event signal names at most this many types (more: it names none, every reader wakes)."""
_MAX_RUNS = 100
"""...and at most this many runs (more: it names none, every reader of those types wakes)."""
_RUNS = "runs:"


class Follower(Protocol):
    """A channel carried on the API process's one subscription (`RedisNotifier.follow`), in
    the order Redis published its messages among the notifier's own: a follower whose
    publisher sends before a job's end or an event is told before the waiters it wakes."""

    def message(self, data: str) -> None:
        """A message of the channel (the subscriber's loop; it must not block)."""

    def following(self, live: bool) -> None:
        """Redis confirmed the channel (True: every message published from now on comes),
        or the subscription was lost or is being made again (False: some may be missed)."""


class _Waiters:
    """Events of the waiting coroutines, by job id; `wake` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        # Jobs finished lately: a waiter that registers just after the notification still wakes.
        self._recent: OrderedDict[str, None] = OrderedDict()

    def wake(self, job_id: str) -> None:
        with self._lock:
            self._recent[job_id] = None
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
            waiting = self._waiting.pop(job_id, [])
        for loop, event in waiting:
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(event.set)

    @contextlib.contextmanager
    def register(self, job_id: str) -> Any:
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if job_id in self._recent:
                event.set()
            self._waiting.setdefault(job_id, []).append(entry)
        try:
            yield event
        finally:
            with self._lock:
                entries = self._waiting.get(job_id)
                if entries is not None and entry in entries:
                    entries.remove(entry)
                    if not entries:
                        del self._waiting[job_id]


_Listener = tuple[
    asyncio.AbstractEventLoop, asyncio.Event, Callable[[str], bool] | None, str | None
]


class _Signal:
    """A broadcast wake-up (events were recorded): the event of every listener whose filter
    matches one of the types recorded (all of them when the types are unknown) and, for a
    listener of one run, whose run is among the runs recorded (any when they are unknown) is
    set; `wake` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listening: list[_Listener] = []

    def wake(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        with self._lock:
            listening = list(self._listening)
        for loop, event, matches, run in listening:
            if types and matches is not None and not any(matches(t) for t in types):
                continue
            if types and run is not None and runs is not None and run not in runs:
                continue
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(event.set)

    @contextlib.contextmanager
    def register(self, matches: Callable[[str], bool] | None = None, run: str | None = None) -> Any:
        entry = (asyncio.get_running_loop(), asyncio.Event(), matches, run)
        with self._lock:
            self._listening.append(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._listening.remove(entry)


def events_payload(types: Collection[str] | None, runs: Collection[str] | None) -> str:
    """The Redis message of an event signal: the types, comma-separated, then `runs:` and
    the runs, space-separated, when they are known ("" when the types are unknown: every
    reader wakes). A reader of an older version keeps the `calcgraph.` items only: it wakes
    for the types, whatever the runs."""
    if not types or len(types) > _MAX_TYPES:
        return ""
    items = sorted(types)
    if runs is not None and len(runs) <= _MAX_RUNS:
        items.append(_RUNS + " ".join(sorted(runs)))
    return ",".join(items)


def parse_events_payload(payload: str) -> tuple[list[str] | None, set[str] | None]:
    """(types or None when unknown, runs or None when unknown) of `events_payload`."""
    types: list[str] = []
    runs: set[str] | None = None
    for item in payload.split(","):
        if item.startswith("calcgraph."):
            types.append(item)
        elif item.startswith(_RUNS):
            runs = set(item[len(_RUNS) :].split())
    return (types, runs) if types else (None, None)


class LocalNotifier:
    """The API and the workers share one process (no Redis)."""

    def __init__(self) -> None:
        self._waiters = _Waiters()
        self._events = _Signal()

    def publish(self, job_id: str) -> None:
        self._waiters.wake(job_id)

    def publish_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        """Events of `types` (None: unknown) belonging to `runs` (None: unknown) were
        committed: wake every reader waiting for one of them."""
        self._events.wake(types, runs)

    async def announce_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        """`publish_events` from an event loop."""
        self._events.wake(types, runs)

    @contextlib.asynccontextmanager
    async def listen_events(
        self, matches: Callable[[str], bool] | None = None, run: str | None = None
    ) -> AsyncIterator[asyncio.Event]:
        with self._events.register(matches, run) as event:
            yield event

    @contextlib.asynccontextmanager
    async def listen(self, job_id: str) -> AsyncIterator[asyncio.Event]:
        with self._waiters.register(job_id) as event:
            yield event

    def steady(self) -> bool:
        """Every notification since long before now reached `listen` (see
        `calcgraph.domain.commit_wait.waiting.wait_for_job`)."""
        return True

    async def close(self) -> None:
        pass


class RedisNotifier:
    """One channel per Redis database; each API process subscribes once, on its first wait."""

    def __init__(self, url: str, prefix: str = "") -> None:
        from calcgraph.ops.redis_clients import sync_client

        self.url = url
        self.channel = f"{prefix}calcgraph:jobs:finished"
        self.events_channel = f"{prefix}calcgraph:events:recorded"
        self._publisher = sync_client(url)
        self._publishers = LoopClients(url, socket_timeout=1.0)
        self._waiters = _Waiters()
        self._events = _Signal()
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._subscribed_at: float | None = None
        self._followers: dict[str, Follower] = {}
        self._down = DownWarning(log, "%s while Redis does not answer (waiters poll): %s")

    def publish(self, job_id: str) -> None:
        # Best effort: a waiter that misses it reads the job again within a second.
        try:
            self._publisher.publish(self.channel, job_id)
        except Exception as exc:  # redis.RedisError, OSError
            self._down("no completion notifications", exc)

    def publish_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        # Best effort too: a reader that misses it re-reads the log within a second.
        self._events.wake(types, runs)
        payload = events_payload(types, runs)
        try:
            self._publisher.publish(self.events_channel, payload)
        except Exception as exc:  # redis.RedisError, OSError
            self._down("no event notifications", exc)

    async def announce_events(
        self, types: Collection[str] | None = None, runs: Collection[str] | None = None
    ) -> None:
        """`publish_events` from an event loop, on its own asyncio client: no thread hop
        between a commit and its wake-up (a thread of the default executor, shared with every
        other blocking call of the process, was a queue of its own there), and a Redis that
        does not answer holds this unit for at most the client's socket timeout, not the loop."""
        self._events.wake(types, runs)
        payload = events_payload(types, runs)
        try:
            await self._publishers.get().publish(self.events_channel, payload)
        except Exception as exc:  # redis.RedisError, OSError
            self._down("no event notifications", exc)

    @contextlib.asynccontextmanager
    async def listen_events(
        self, matches: Callable[[str], bool] | None = None, run: str | None = None
    ) -> AsyncIterator[asyncio.Event]:
        await self._ensure_subscribed()
        with self._events.register(matches, run) as event:
            yield event

    async def _subscribe(self, ready: asyncio.Event) -> None:
        # Subscribed for good: after a Redis restart (or while it is down) the subscription
        # is made again; meanwhile waiters poll the job store at their backoff.
        while True:
            try:
                await self._listen(ready)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # redis.RedisError, OSError
                self._down("no completion notifications", exc)
            finally:
                self._subscribed_at = None
                self._tell_following(False)
                ready.set()
            await asyncio.sleep(_RESUBSCRIBE_S)

    async def _listen(self, ready: asyncio.Event) -> None:
        from calcgraph.ops.redis_clients import async_client

        client = async_client(self.url, client_name=f"{self.channel}:subscriber")
        pubsub = client.pubsub()
        try:
            followers = dict(self._followers)
            await pubsub.subscribe(self.channel, self.events_channel, *followers)
            # The client connects again by itself when its connection drops (and subscribes
            # again): what was published meanwhile is lost, so its followers are told at once,
            # and live again when Redis confirms their channel.
            pubsub.connection.register_connect_callback(self._connected)
            self._subscribed_at = asyncio.get_running_loop().time()
            ready.set()
            while True:
                message = await pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                channel = message.get("channel")
                if isinstance(channel, bytes):
                    channel = channel.decode()
                follower = followers.get(str(channel))
                if message.get("type") == "subscribe":
                    if follower is not None:
                        follower.following(True)
                    continue
                if message.get("type") != "message":
                    continue
                data = message["data"]
                if isinstance(data, bytes):
                    data = data.decode()
                if channel == self.events_channel:
                    self._events.wake(*parse_events_payload(str(data)))
                elif follower is not None:
                    follower.message(str(data))
                else:
                    self._waiters.wake(str(data))
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
                await client.aclose()

    def _connected(self, connection: object) -> None:
        """The subscription's connection was made again (a redis-py connect callback)."""
        self._tell_following(False)

    def follow(self, channel: str, follower: Follower) -> None:
        """Carry `channel` on this process's subscription from its next start (`subscribe`
        starts it when none runs)."""
        self._followers[channel] = follower

    def subscribe(self) -> None:
        """Start the subscription on the running loop unless it runs; without waiting."""
        if self._task is None or self._task.done():
            self._ready = asyncio.Event()
            self._task = asyncio.create_task(self._subscribe(self._ready))

    def _tell_following(self, live: bool) -> None:
        for follower in list(self._followers.values()):
            try:
                follower.following(live)
            except Exception:
                log.exception("a follower of the subscription failed")

    async def _ensure_subscribed(self) -> None:
        self.subscribe()
        assert self._ready is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), 2.0)

    @contextlib.asynccontextmanager
    async def listen(self, job_id: str) -> AsyncIterator[asyncio.Event]:
        await self._ensure_subscribed()
        with self._waiters.register(job_id) as event:
            yield event

    def steady(self) -> bool:
        # Subscribed for a while: a job submitted just now finished after the subscription,
        # so its notification arrives (or arrived: `_Waiters` remembers recent ones).
        since = self._subscribed_at
        return since is not None and asyncio.get_running_loop().time() - since > _STEADY_AFTER_S

    async def close(self) -> None:
        await tasks.stop(self._task)
        self._task = None
        self._publisher.close()
        await self._publishers.aclose()


Notifier = LocalNotifier | RedisNotifier
