"""Whether the current unit of work recorded an event: `record` marks it, and the unit's
hook (`calcgraph.workers.event_signal`) tells the waiting readers after the commit. A unit
opened without that hook records all the same; readers then find its events at their next
re-check. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_MARK: ContextVar[list[bool] | None] = ContextVar("calcgraph_events_recorded", default=None)


def mark() -> None:
    found = _MARK.get()
    if found is not None and not found:
        found.append(True)


@contextmanager
def collecting() -> Iterator[list[bool]]:
    """A fresh mark for one unit of work: non-empty after it recorded an event."""
    mark_list: list[bool] = []
    token = _MARK.set(mark_list)
    try:
        yield mark_list
    finally:
        _MARK.reset(token)
