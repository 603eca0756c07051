"""The warm pool: started sandboxes kept per function version and user, least recently used
evicted.

A job takes an idle sandbox of its function version *for its user* (the spec's `tenant`; or
starts one), runs on it alone, and gives it back: jobs of different users never share a sandbox
process, its memory or its /tmp (contract section 8), even for one public function. A sandbox
that died (timeout, out of memory, crash) is not given back. At most
`max_size` idle sandboxes are kept (the specification's warm container cache of 200), and
none longer than `max_idle_seconds` (contract section 8b: a warm sandbox idle for 10 minutes
is stopped), by a reaper thread that wakes as the oldest idle one comes due.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calcgraph.workers.sandbox.base import (
    RunRequest,
    RunResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
)

Attach = Callable[[Sandbox], None]
"""Told the sandbox a job is about to run on (`calcgraph.workers.cancel`)."""


@dataclass
class PoolStats:
    hits: int = 0
    """Jobs run on a warm sandbox."""
    starts: int = 0
    """Sandboxes started (cold jobs and explicit warm-ups)."""
    evictions: int = 0
    """Idle sandboxes closed to stay within the size."""
    discarded: int = 0
    """Sandboxes not given back because they died or their version's spec changed."""
    expired: int = 0
    """Idle sandboxes stopped after `max_idle_seconds` without a job."""


class WarmPool:
    """Thread-safe; one sandbox runs one job at a time."""

    def __init__(
        self, backend: SandboxBackend, max_size: int = 200, max_idle_seconds: float = 600.0
    ) -> None:
        if max_size < 0:
            raise ValueError("max_size must be >= 0")
        if max_idle_seconds <= 0:
            raise ValueError("max_idle_seconds must be > 0")
        self.backend = backend
        self.max_size = max_size
        self.max_idle_seconds = max_idle_seconds
        self.stats = PoolStats()
        self._lock = threading.Lock()
        # Insertion order is recency: the first entry is the least recently used idle sandbox.
        # Entries are keyed by (function version, tenant).
        self._idle: OrderedDict[int, tuple[tuple[str, str], Sandbox]] = OrderedDict()
        self._idle_since: dict[int, float] = {}
        self._closed = False
        self._wake = threading.Condition(self._lock)
        self._reaper: threading.Thread | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._idle)

    def keys(self) -> list[str]:
        """The function versions with an idle sandbox, least recently used first, each as
        `version` (no tenant) or `version@tenant`."""
        with self._lock:
            entries = [entry for entry, _ in self._idle.values()]
        return [f"{key}@{tenant}" if tenant else key for key, tenant in entries]

    def _take(self, key: str, spec: SandboxSpec) -> tuple[Sandbox | None, list[Sandbox]]:
        stale: list[Sandbox] = []
        found: Sandbox | None = None
        wanted = (key, spec.tenant)
        with self._lock:
            # A snapshot: the loop deletes the entry it takes and then keeps looking for stale ones.
            for ident, (entry_key, sandbox) in reversed(list(self._idle.items())):
                if entry_key != wanted:
                    continue
                if sandbox.spec == spec and sandbox.alive and found is None:
                    found = sandbox
                    del self._idle[ident]
                    self._idle_since.pop(ident, None)
                elif sandbox.spec != spec or not sandbox.alive:
                    stale.append(sandbox)
            for sandbox in stale:
                self._idle.pop(id(sandbox), None)
                self._idle_since.pop(id(sandbox), None)
            self.stats.discarded += len(stale)
            if found is not None:
                self.stats.hits += 1
        return found, stale

    def _give_back(self, key: str, sandbox: Sandbox) -> None:
        evicted: list[Sandbox] = []
        with self._lock:
            if self._closed or not sandbox.alive or self.max_size == 0:
                evicted.append(sandbox)
                if not sandbox.alive:
                    self.stats.discarded += 1
            else:
                self._idle[id(sandbox)] = ((key, sandbox.spec.tenant), sandbox)
                self._idle_since[id(sandbox)] = time.monotonic()
                while len(self._idle) > self.max_size:
                    ident, (_, oldest) = self._idle.popitem(last=False)
                    self._idle_since.pop(ident, None)
                    evicted.append(oldest)
                    self.stats.evictions += 1
                if self._reaper is None:
                    self._reaper = threading.Thread(
                        target=self._reap, name="warm-pool-reaper", daemon=True
                    )
                    self._reaper.start()
        for old in evicted:
            old.close()

    def _start(self, spec: SandboxSpec) -> Sandbox:
        sandbox = self.backend.start(spec)
        with self._lock:
            self.stats.starts += 1
        return sandbox

    def warm(self, key: str, spec: SandboxSpec) -> None:
        """Start a sandbox for `key` ahead of its first job."""
        self._give_back(key, self._start(spec))

    def acquire(self, key: str, spec: SandboxSpec) -> Sandbox:
        """A sandbox of `key`, warm if one is idle, for the caller alone until `release`: a
        chain runs its consecutive nodes of one function version on it. Raises SandboxError
        when none can be started."""
        sandbox, stale = self._take(key, spec)
        for old in stale:
            old.close()
        return sandbox if sandbox is not None else self._start(spec)

    def release(self, key: str, sandbox: Sandbox) -> None:
        """Give back a sandbox from `acquire` (closed instead when it died)."""
        self._give_back(key, sandbox)

    def run(self, key: str, request: RunRequest, attach: Attach | None = None) -> RunResult:
        """Run one job of function version `key` on a warm sandbox, starting one if needed.
        `attach` is told the sandbox before the job goes in (a cancel kills it; a sandbox
        killed so is not alive and is discarded, never given back)."""
        return self.run_spec(key, request.spec, request.inputs, attach)

    def run_spec(
        self,
        key: str,
        spec: SandboxSpec,
        inputs: Mapping[str, Any],
        attach: Attach | None = None,
    ) -> RunResult:
        began = time.monotonic()
        sandbox, stale = self._take(key, spec)
        for old in stale:
            old.close()
        if sandbox is None:
            try:
                sandbox = self._start(spec)
            except SandboxError as exc:
                return exc.result(time.monotonic() - began)
        try:
            if attach is not None:
                attach(sandbox)
            result = sandbox.run(inputs)
        finally:
            self._give_back(key, sandbox)
        return result.with_duration(time.monotonic() - began)

    def discard(self, key: str) -> None:
        """Close every idle sandbox of `key`, every user's (e.g. the function version was
        deleted)."""
        with self._lock:
            doomed = [(i, s) for i, ((k, _), s) in self._idle.items() if k == key]
            for ident, _ in doomed:
                del self._idle[ident]
                self._idle_since.pop(ident, None)
        for _, sandbox in doomed:
            sandbox.close()

    def close(self) -> None:
        """Close every idle sandbox; sandboxes still running a job are closed when they return."""
        with self._lock:
            self._closed = True
            doomed = [sandbox for _, sandbox in self._idle.values()]
            self._idle.clear()
            self._idle_since.clear()
            self._wake.notify_all()
        for sandbox in doomed:
            sandbox.close()

    def expire(self, now: float | None = None) -> int:
        """Stop every sandbox idle for `max_idle_seconds` or more by `now` (monotonic); how
        many. The reaper calls it; a sandbox running a job is not idle."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [
                i for i, since in self._idle_since.items() if now - since >= self.max_idle_seconds
            ]
            doomed = [self._idle.pop(ident)[1] for ident in due]
            for ident in due:
                del self._idle_since[ident]
            self.stats.expired += len(doomed)
        for sandbox in doomed:
            sandbox.close()
        return len(doomed)

    def _reap(self) -> None:
        """Sleep until the oldest idle sandbox comes due, expire, again; until `close`."""
        while True:
            with self._lock:
                if self._closed:
                    return
                oldest = min(self._idle_since.values(), default=None)
                wait = (
                    self.max_idle_seconds
                    if oldest is None
                    else oldest + self.max_idle_seconds - time.monotonic()
                )
                if wait > 0:
                    self._wake.wait(wait)
                    continue
            self.expire()
