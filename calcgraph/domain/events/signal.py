"""What the current unit of work recorded: `record` marks the types of its events and the
workflow runs they belong to, and the unit's hook (`calcgraph.workers.event_signal`) tells
the waiting readers after the commit, so that a reader whose type filter matches none of the
types, or whose `run` filter names none of the runs, sleeps on. The hook's unit also holds its
event rows (`held`, on its session): they are written and numbered by one statement, its last.
A unit opened without that hook records all the same; readers then find its events at their
next re-check. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Marks:
    """The types a unit recorded and the runs its events belong to (every one known: an
    event outside a run adds none)."""

    types: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    rows: list[dict[str, Any]] = field(default_factory=list)
    """The unit's event rows, held for its last statement to write with their positions."""
    unheld: bool = False
    """Events were written as they were recorded (by a session of no such unit, inside it):
    the unit numbers what it finds unnumbered, as a unit that holds none did."""
    at_commit: bool = False
    """The unit changes rows after the statement that would have written its events: the
    hook writes them before the commit instead (`events.service.events_at_commit`)."""

    def __bool__(self) -> bool:
        return bool(self.types)

    def hold(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.rows.extend(dict(row) for row in rows)
        self.types.update(str(row["type"]) for row in rows)
        self.runs.update(str(row["run_id"]) for row in rows if row.get("run_id") is not None)

    def written(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rows the unit wrote with their positions itself (by the statement that made its
        last change, taking the held ones): marked as held rows are."""
        for row in rows:
            self.types.add(str(row["type"]))
            if row.get("run_id") is not None:
                self.runs.add(str(row["run_id"]))

    def take(self) -> list[dict[str, Any]]:
        """The held rows, for the statement that writes them now (`written` marks its own)."""
        taken, self.rows = self.rows, []
        return taken


HELD = "calcgraph.events.held"
"""The key of a write unit's `Marks` in its session's `info`: the session whose events are
held for the unit's hook (set by the hook when the session opens; any other session writes
its events as they are recorded)."""


_MARK: ContextVar[Marks | None] = ContextVar("calcgraph_events_recorded", default=None)


def mark(*types: str, runs: Iterable[str | None] = ()) -> None:
    """The unit recorded events of these types, belonging to these runs."""
    found = _MARK.get()
    if found is not None:
        found.types.update(types)
        found.runs.update(r for r in runs if r is not None)
        found.unheld = True


@contextmanager
def collecting() -> Iterator[Marks]:
    """Fresh marks for one unit of work (true after it recorded an event)."""
    marks = Marks()
    token = _MARK.set(marks)
    try:
        yield marks
    finally:
        _MARK.reset(token)
