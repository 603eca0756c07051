"""Which runs a unit of work changed, so that a tick finding nothing new can be answered
without the database. Pure: the collector, the token and the port; the adapters (in process,
Redis) are `calcgraph.workers.run_changes`.

Every write that can change what a tick of a run answers or decides calls `changed(run_id)`
in its unit of work: run creation, a tick that writes (cancel included), a job of the run
reaching an end (worker finish, claim refused, cancel, the sweeper), a chain worker's start of
a node's job. A write that changes runs it cannot name (a job ended by id alone) calls
`everything()`. After the commit, the unit's hook gives each changed run a fresh token (a
value never used before) in the port: the process's own map on the embedded default, Redis
when it is configured (shared by every `serve` and `calcgraph worker` process).

A reader reads a run's token *before* it reads the database, and keeps what it read under
that token; a change committed after that read is followed by a fresh token, so the kept
answer no longer matches. A run without a token (never marked since the port started, or
forgotten) has no kept answer: the reader reads the database and gives it a token then.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

EVERYTHING = "*"
"""The mark of a write that changed runs it cannot name: every run's token is renewed."""

_MARKS: ContextVar[set[str] | None] = ContextVar("calcgraph_runs_changed", default=None)

Token = tuple[str, str]
"""(the run's token, the epoch every `everything()` renews): equal tokens, same answer."""


def changed(*run_ids: str | None) -> None:
    """The current unit of work changed these runs (None: a job of no run, ignored)."""
    found = _MARKS.get()
    if found is not None:
        found.update(run_id for run_id in run_ids if run_id is not None)


def everything() -> None:
    """The current unit of work may have changed any run."""
    changed(EVERYTHING)


@contextmanager
def collecting() -> Iterator[set[str]]:
    """A fresh set of marks for one unit of work."""
    marks: set[str] = set()
    token = _MARKS.set(marks)
    try:
        yield marks
    finally:
        _MARKS.reset(token)


class RunChanges(Protocol):
    """The tokens of runs, as every process serving them sees them."""

    async def token(self, run_id: str) -> Token | None:
        """The run's token now; None when the run has none yet (or the store cannot say)."""
        ...

    async def issue(self, run_id: str) -> None:
        """Give a run without a token one (kept unless a mark came first)."""
        ...

    async def mark(self, run_ids: set[str]) -> None:
        """Fresh tokens for these runs (`EVERYTHING` among them: a fresh epoch)."""
        ...

    def marked(self, run_id: str) -> Token | None:
        """The token this process's last mark of the run gave it, as the store held it then,
        without asking the store (None: not known). A tick that changed the run notes it."""
        ...
