"""The outbox hook of the unit of work: messages `enqueue`d during a write session are sent
after its commit, and dropped when it rolls back. This is the one place the rule lives."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.enqueue import Message, collecting

log = logging.getLogger("calcgraph.workers.outbox")

Sender = Callable[[Message], None]


class Outbox:
    """A `UnitHook` for `Database.write_session`."""

    def __init__(self, send: Sender) -> None:
        self.send = send

    def begin(self) -> Any:
        manager = collecting()
        buffer = manager.__enter__()
        return manager, buffer

    async def committed(self, state: Any) -> None:
        _, buffer = state
        pending, buffer[:] = list(buffer), []
        for index, message in enumerate(pending):
            try:
                self.send(message)
            except Exception:
                # The rows are committed and `queued`: the sweeper re-sends them. Failing the
                # request here would tell the caller the job does not exist when it does; and
                # a broker that refused one message refuses the next (each after its retries):
                # the rest of the unit's messages wait for the sweeper too.
                log.exception(
                    "could not send %s (and %d more); the sweeper will re-send them",
                    message.actor,
                    len(pending) - index - 1,
                )
                return

    def end(self, state: Any) -> None:
        manager, buffer = state
        buffer.clear()  # after a rollback: the messages of rows that never existed
        manager.__exit__(None, None, None)


def attach(database: Database, send: Sender) -> Outbox:
    """Give `database`'s write sessions an outbox that sends through `send` (replacing an
    earlier one: two outboxes would send every message twice)."""
    outbox = Outbox(send)
    database.unit_hooks[:] = [h for h in database.unit_hooks if not isinstance(h, Outbox)]
    database.unit_hooks.append(outbox)
    return outbox
