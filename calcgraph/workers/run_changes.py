"""The run tokens of `calcgraph.domain.runs.changes`: in the process on the embedded default,
in Redis when it is configured; and the unit-of-work hook that renews them after a commit.

In Redis a run's token is a key holding a random value (`SET`, never `INCR`: a key that
expired or a Redis that restarted empty must not bring an old value back), kept a day after
its last change; the epoch is one more key. A tick reads both in one `MGET`. A mark reads the
epoch in the round trip that sets the tokens, and the process remembers the tokens it set
(`marked`): a tick that changed its run notes the token after its commit without reading it.
An API process keeps the tokens it read (`_Known`), served without a round trip (on an
unchanged tick that round trip was a third of the API's CPU), while its subscription
(`RedisNotifier`'s one connection) carries every mark's run ids: a mark publishes them in
its round trip, before the unit's caller wakes anyone, and a reader woken by a job's end or an
event is woken on that same connection after them, so it never meets a token the mark
replaced. Without the subscription (not yet made, lost, Redis restarting) nothing kept is
served; a token is kept at most `KNOWN_MAX_AGE_S`.
While Redis does not answer, a run has no token (every tick reads the database) and a mark is
lost, with a warning: the tick's kept answers are dropped after `ANSWER_MAX_AGE_S` whatever
their token (`calcgraph.domain.runs.memo`), which bounds what a mark lost to a Redis outage
can hide.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from contextlib import AbstractContextManager
from typing import Any

from calcgraph.db.engine import CollectingHook, Database
from calcgraph.domain.runs.changes import EVERYTHING, RunChanges, Token, collecting
from calcgraph.ops.redis_clients import DownWarning, LoopClients
from calcgraph.workers.notify import RedisNotifier

log = logging.getLogger("calcgraph.workers.run_changes")
_KEEP_S = 24 * 3600
_DOWN_S = 1.0
_MARKED = 10_000
KNOWN_MAX_AGE_S = 20.0
_KNOWN = 100_000
_RECENT = 10_000


class _Known:
    """The tokens this process read, while the subscription that renews them is live. Any
    thread. A read keeps what it found only when no mark of its run (nor of every run) came
    in since it was asked (`stamp`): a read answered with the old value after the mark's
    message arrived would keep a replaced token."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._lock = threading.Lock()
        self._tokens: OrderedDict[str, tuple[Token, float]] = OrderedDict()
        self._live = False
        self._count = 0
        """Marks heard (each message one), the stamp a read is asked at."""
        self._marked_at: OrderedDict[str, int] = OrderedDict()
        """The last `_RECENT` runs marked, and at which count."""
        self._floor = 0
        """Reads stamped before this count are not kept (what was marked then is forgotten)."""

    def get(self, run_id: str) -> Token | None:
        with self._lock:
            found = self._tokens.get(run_id)
            if found is None:
                return None
            token, at = found
            if time.monotonic() - at > self.max_age:
                del self._tokens[run_id]
                return None
            return token

    def stamp(self) -> int | None:
        """The count to give `keep`; None while nothing can be kept."""
        with self._lock:
            return self._count if self._live else None

    def keep(self, run_id: str, token: Token, stamp: int) -> None:
        with self._lock:
            if not self._live or stamp < self._floor:
                return
            if self._marked_at.get(run_id, -1) > stamp:
                return
            self._tokens.pop(run_id, None)
            self._tokens[run_id] = (token, time.monotonic())
            while len(self._tokens) > _KNOWN:
                self._tokens.popitem(last=False)

    def marked(self, run_ids: Collection[str]) -> None:
        with self._lock:
            self._count += 1
            if EVERYTHING in run_ids:
                self._tokens.clear()
                self._floor = self._count
                return
            for run_id in run_ids:
                self._tokens.pop(run_id, None)
                self._marked_at.pop(run_id, None)
                self._marked_at[run_id] = self._count
            while len(self._marked_at) > _RECENT:
                _, at = self._marked_at.popitem(last=False)
                self._floor = max(self._floor, at)

    def live(self, live: bool) -> None:
        with self._lock:
            self._live = live
            self._count += 1
            self._tokens.clear()
            self._marked_at.clear()
            self._floor = self._count

    # The subscription's `Follower`.
    def message(self, data: str) -> None:
        self.marked(data.split())

    def following(self, live: bool) -> None:
        self.live(live)


class LocalRunChanges:
    """One process (no Redis): tokens from a counter, at most `size` runs remembered (one
    forgotten renews the epoch, so no run can meet an old token again). Any thread."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._runs: OrderedDict[str, str] = OrderedDict()
        self._epoch = "0"

    async def token(self, run_id: str) -> Token | None:
        found = self._runs.get(run_id)
        return None if found is None else (found, self._epoch)

    async def issue(self, run_id: str) -> None:
        with self._lock:
            if run_id not in self._runs:
                self._runs[run_id] = str(next(self._count))
                self._forget_beyond_size()

    async def mark(self, run_ids: set[str]) -> None:
        with self._lock:
            for run_id in run_ids:
                if run_id == EVERYTHING:
                    self._epoch = str(next(self._count))
                else:
                    self._runs.pop(run_id, None)
                    self._runs[run_id] = str(next(self._count))
            self._forget_beyond_size()

    def marked(self, run_id: str) -> Token | None:
        found = self._runs.get(run_id)
        return None if found is None else (found, self._epoch)

    async def close(self) -> None:
        pass

    def _forget_beyond_size(self) -> None:
        """The runs marked longest ago beyond `size`, each renewing the epoch."""
        while len(self._runs) > self._size:
            self._runs.popitem(last=False)
            self._epoch = str(next(self._count))


class RedisRunChanges:
    """Shared by every process of one Redis database and key prefix."""

    def __init__(self, url: str, prefix: str = "", known_max_age: float = KNOWN_MAX_AGE_S) -> None:
        self.url = url
        self._prefix = f"{prefix}calcgraph:run-changes:"
        self._epoch_key = f"{self._prefix}epoch"
        self.channel = f"{self._prefix}marked"
        self._known = _Known(known_max_age)
        self._notifier: RedisNotifier | None = None
        self._clients = LoopClients(url, socket_timeout=1.0)
        self._down_until = 0.0
        self._warn = DownWarning(log, "%s while Redis does not answer: %s")
        self._lock = threading.Lock()
        self._marked: OrderedDict[str, Token] = OrderedDict()
        """The tokens this process's marks set, the last `_MARKED` runs (any thread)."""

    def _down(self, what: str, exc: Exception) -> None:
        now = time.monotonic()
        self._down_until = now + _DOWN_S
        self._warn(what, exc)

    def follow(self, notifier: RedisNotifier) -> None:
        """Keep the tokens read, renewed by the marks `notifier`'s subscription carries."""
        self._notifier = notifier
        notifier.follow(self.channel, self._known)

    def keeping(self) -> bool:
        """Tokens read are kept (the subscription carries the marks: Redis confirmed it)."""
        return self._known.stamp() is not None

    async def token(self, run_id: str) -> Token | None:
        if time.monotonic() < self._down_until:
            return None
        known = self._known.get(run_id)
        if known is not None:
            return known
        stamp = self._known.stamp()
        if stamp is None and self._notifier is not None:
            self._notifier.subscribe()
        try:
            run, epoch = await self._clients.get().mget(self._prefix + run_id, self._epoch_key)
        except Exception as exc:  # redis.RedisError, OSError
            self._down("ticks read the database", exc)
            return None
        if run is None:
            return None
        if epoch is None:
            await self.issue(EVERYTHING)
            return None
        token = (run.decode(), epoch.decode())
        if stamp is not None:
            self._known.keep(run_id, token, stamp)
        return token

    async def issue(self, run_id: str) -> None:
        key = self._epoch_key if run_id == EVERYTHING else self._prefix + run_id
        try:
            await self._clients.get().set(key, _fresh(), nx=True, ex=_KEEP_S)
        except Exception as exc:  # redis.RedisError, OSError
            self._down("ticks read the database", exc)

    async def mark(self, run_ids: set[str]) -> None:
        values = {run_id: _fresh() for run_id in sorted(run_ids)}
        try:
            pipeline = self._clients.get().pipeline(transaction=False)
            for run_id, value in values.items():
                key = self._epoch_key if run_id == EVERYTHING else self._prefix + run_id
                pipeline.set(key, value, ex=_KEEP_S)
            pipeline.get(self._epoch_key)  # the same round trip
            pipeline.publish(self.channel, " ".join(values))  # every process's kept tokens
            *_, epoch, _ = await pipeline.execute()
        except Exception as exc:  # redis.RedisError, OSError
            self._remember({run_id: None for run_id in values})
            self._known.marked(values)
            self._down("a run's change was not marked (its kept ticks expire)", exc)
            return
        # Here at once: a reader this process wakes next is not woken through Redis.
        self._known.marked(values)
        tokens: dict[str, Token | None] = {}
        for run_id, value in values.items():
            if run_id != EVERYTHING:
                tokens[run_id] = None if epoch is None else (value, epoch.decode())
        self._remember(tokens)

    def marked(self, run_id: str) -> Token | None:
        with self._lock:
            return self._marked.get(run_id)

    def _remember(self, tokens: dict[str, Token | None]) -> None:
        with self._lock:
            for run_id, token in tokens.items():
                self._marked.pop(run_id, None)
                if token is not None:
                    self._marked[run_id] = token
            while len(self._marked) > _MARKED:
                self._marked.popitem(last=False)

    async def close(self) -> None:
        await self._clients.aclose()


def _fresh() -> str:
    return os.urandom(9).hex()


class RunChangeSignal(CollectingHook):
    """A `UnitHook`: the runs a committed unit changed get fresh tokens, before the unit's
    caller goes on (a worker publishes the job's end after this: a waiter it wakes sees the
    change)."""

    def __init__(self, changes: RunChanges) -> None:
        self.changes = changes

    def collect(self) -> AbstractContextManager[set[str]]:
        return collecting()

    async def committed(self, state: Any) -> None:
        _, marks = state
        if marks:
            await self.changes.mark(set(marks))


def attach_run_changes(database: Database, changes: RunChanges) -> None:
    """Give `database`'s write sessions the hook (replacing an earlier one), ahead of any hook
    that wakes readers (`wakes_readers`: the event signal), whichever was attached first: a
    page woken by a job's event ticks at once, and its tick must find the run's token renewed,
    not answer what it kept from before the job ended (a missed wake-up)."""
    hooks = database.unit_hooks
    hooks[:] = [h for h in hooks if not isinstance(h, RunChangeSignal)]
    waking = [i for i, h in enumerate(hooks) if getattr(h, "wakes_readers", False)]
    hooks.insert(waking[0] if waking else len(hooks), RunChangeSignal(changes))


RunChangeStore = LocalRunChanges | RedisRunChanges
