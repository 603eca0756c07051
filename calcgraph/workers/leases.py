"""The leases a worker process holds: one per delivery it runs (a claim's token), counted, so
a chain that runs its nodes under one lease keeps it while any of them runs."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator


class Leases:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()

    @contextlib.contextmanager
    def holding(self, lease: str) -> Iterator[None]:
        with self._lock:
            self._held[lease] += 1
        try:
            yield
        finally:
            with self._lock:
                self._held[lease] -= 1
                if self._held[lease] <= 0:
                    del self._held[lease]

    def snapshot(self) -> list[str]:
        with self._lock:
            return sorted(self._held)
