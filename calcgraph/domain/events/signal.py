"""What the current unit of work recorded: `record` marks the types of its events and the
workflow runs they belong to, and the unit's hook (`calcgraph.workers.event_signal`) tells
the waiting readers after the commit, so that a reader whose type filter matches none of the
types, or whose `run` filter names none of the runs, sleeps on. A unit opened without that
hook records all the same; readers then find its events at their next re-check. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Marks:
    """The types a unit recorded and the runs its events belong to (every one known: an
    event outside a run adds none)."""

    types: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.types)


_MARK: ContextVar[Marks | None] = ContextVar("calcgraph_events_recorded", default=None)


def mark(*types: str, runs: Iterable[str | None] = ()) -> None:
    """The unit recorded events of these types, belonging to these runs."""
    found = _MARK.get()
    if found is not None:
        found.types.update(types)
        found.runs.update(r for r in runs if r is not None)


@contextmanager
def collecting() -> Iterator[Marks]:
    """Fresh marks for one unit of work (true after it recorded an event)."""
    marks = Marks()
    token = _MARK.set(marks)
    try:
        yield marks
    finally:
        _MARK.reset(token)
