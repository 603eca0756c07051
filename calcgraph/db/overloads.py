"""Requests refused past the database queue (`Overloaded`), in either door, logged once per
`LOG_SECONDS` with their count: an overloaded server refuses hundreds a second, and a line for
each would spend on logging what it sheds."""

from __future__ import annotations

import logging
import math
import threading
import time

log = logging.getLogger("calcgraph.errors")
LOG_SECONDS = 10.0


class _Overloads:
    def __init__(self) -> None:
        self.count = 0
        self.logged_at = -math.inf
        self._lock = threading.Lock()

    def note(self, exc: BaseException) -> None:
        with self._lock:
            self.count += 1
            now = time.monotonic()
            if now - self.logged_at < LOG_SECONDS:
                return
            count, self.count, self.logged_at = self.count, 0, now
        log.warning("overloaded: %d requests answered Unavailable lately (%s)", count, exc)


_overloads = _Overloads()


def note(exc: BaseException) -> None:
    """Count one refusal; log the count at most once per `LOG_SECONDS`."""
    _overloads.note(exc)
