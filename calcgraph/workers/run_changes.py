"""The run tokens of `calcgraph.domain.runs.changes`: in the process on the embedded default,
in Redis when it is configured; and the unit-of-work hook that renews them after a commit.

In Redis a run's token is a key holding a random value (`SET`, never `INCR`: a key that
expired or a Redis that restarted empty must not bring an old value back), kept a day after
its last change; the epoch is one more key. A tick reads both in one `MGET`. A mark reads the
epoch in the round trip that sets the tokens, and the process remembers the tokens it set
(`marked`): a tick that changed its run notes the token after its commit without reading it.
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
from contextlib import AbstractContextManager
from typing import Any

from calcgraph.db.engine import CollectingHook, Database
from calcgraph.domain.runs.changes import EVERYTHING, RunChanges, Token, collecting
from calcgraph.ops.redis_clients import DownWarning, LoopClients

log = logging.getLogger("calcgraph.workers.run_changes")
_KEEP_S = 24 * 3600
_DOWN_S = 1.0
_MARKED = 10_000


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
                self._put(run_id)

    async def mark(self, run_ids: set[str]) -> None:
        with self._lock:
            for run_id in run_ids:
                if run_id == EVERYTHING:
                    self._epoch = str(next(self._count))
                else:
                    self._put(run_id)

    def marked(self, run_id: str) -> Token | None:
        found = self._runs.get(run_id)
        return None if found is None else (found, self._epoch)

    async def close(self) -> None:
        pass

    def _put(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._runs[run_id] = str(next(self._count))
        while len(self._runs) > self._size:
            self._runs.popitem(last=False)
            self._epoch = str(next(self._count))


class RedisRunChanges:
    """Shared by every process of one Redis database and key prefix."""

    def __init__(self, url: str, prefix: str = "") -> None:
        self.url = url
        self._prefix = f"{prefix}calcgraph:run-changes:"
        self._epoch_key = f"{self._prefix}epoch"
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

    async def token(self, run_id: str) -> Token | None:
        if time.monotonic() < self._down_until:
            return None
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
        return (run.decode(), epoch.decode())

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
            *_, epoch = await pipeline.execute()
        except Exception as exc:  # redis.RedisError, OSError
            self._remember({run_id: None for run_id in values})
            self._down("a run's change was not marked (its kept ticks expire)", exc)
            return
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
