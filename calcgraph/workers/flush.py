"""The outbox hook of the unit of work: messages `enqueue`d during a write session are sent
after its commit, and dropped when it rolls back. This is the one place the rule lives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.enqueue import Message, collecting

log = logging.getLogger("calcgraph.workers.outbox")

Sender = Callable[[Message], None]
BatchSender = Callable[[Sequence[Message]], int]
"""Sends a unit of work's messages at once; returns how many could not be sent (it logs them)."""


class Outbox:
    """A `UnitHook` for `Database.write_session`. With `off_loop`, the (blocking) send runs in
    a thread: a tick that submits 1,000 jobs does not hold up every other request meanwhile."""

    def __init__(
        self, send: Sender, send_many: BatchSender | None = None, off_loop: bool = False
    ) -> None:
        self.send = send
        self.send_many = send_many if send_many is not None else self._each
        self.off_loop = off_loop

    def _each(self, messages: Sequence[Message]) -> int:
        failed = 0
        for message in messages:
            try:
                self.send(message)
            except Exception:
                log.exception("could not send %s; the sweeper will re-send it", message.actor)
                failed += 1
        return failed

    def begin(self) -> Any:
        manager = collecting()
        buffer = manager.__enter__()
        return manager, buffer

    async def committed(self, state: Any) -> None:
        _, buffer = state
        pending, buffer[:] = list(buffer), []
        if not pending:
            return
        # A message not sent leaves its row committed and `queued`: the sweeper re-sends it.
        # Failing the request here would tell the caller the job does not exist when it does.
        try:
            if self.off_loop:
                await asyncio.to_thread(self.send_many, pending)
            else:
                self.send_many(pending)
        except Exception:
            log.exception("could not send %d messages; the sweeper will re-send them", len(pending))

    def end(self, state: Any) -> None:
        manager, buffer = state
        buffer.clear()  # after a rollback: the messages of rows that never existed
        manager.__exit__(None, None, None)


def attach(
    database: Database,
    send: Sender,
    send_many: BatchSender | None = None,
    *,
    off_loop: bool = False,
) -> Outbox:
    """Give `database`'s write sessions an outbox that sends through `send`, or `send_many` a
    unit's messages at once (replacing an earlier one: two outboxes would send every message
    twice); `off_loop`: the send blocks (Redis), run it in a thread."""
    outbox = Outbox(send, send_many, off_loop)
    database.unit_hooks[:] = [h for h in database.unit_hooks if not isinstance(h, Outbox)]
    database.unit_hooks.append(outbox)
    return outbox
