"""Whether the current unit of work recorded an event: `record` marks it, and the unit's
hook (`calcgraph.workers.event_signal`) tells the waiting readers after the commit. A unit
opened without that hook records all the same; readers then find its events at their next
re-check. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_MARK: ContextVar[set[str] | None] = ContextVar("calcgraph_events_recorded", default=None)


def mark(*types: str) -> None:
    """The unit recorded events of these types."""
    found = _MARK.get()
    if found is not None:
        found.update(types)


@contextmanager
def collecting() -> Iterator[set[str]]:
    """A fresh mark for one unit of work: the types of the events it recorded (non-empty
    after it recorded one)."""
    marks: set[str] = set()
    token = _MARK.set(marks)
    try:
        yield marks
    finally:
        _MARK.reset(token)
