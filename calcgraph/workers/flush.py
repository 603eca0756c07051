"""The outbox hook of the unit of work: messages `enqueue`d during a write session are sent
after its commit, and dropped when it rolls back. This is the one place the rule lives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from calcgraph.db.engine import CollectingHook, Database
from calcgraph.domain.jobs.enqueue import Message, collecting

log = logging.getLogger("calcgraph.workers.outbox")

Sender = Callable[[Message], None]
BatchSender = Callable[[Sequence[Message]], int]
"""Sends a unit of work's messages at once; returns how many could not be sent (it logs them)."""
AsyncBatchSender = Callable[[Sequence[Message]], Awaitable[int]]
"""The same on the event loop (Redis through an asyncio client)."""


def send_each(send: Sender, messages: Sequence[Message]) -> int:
    """Send `messages` one by one; returns how many could not be sent (it logs them)."""
    for index, message in enumerate(messages):
        try:
            send(message)
        except Exception:
            # A broker that refused one message refuses the next (each after its retries):
            # the rest of the unit's messages wait for the sweeper too.
            left = len(messages) - index
            log.exception(
                "could not send %s (and %d more); the sweeper will re-send them",
                message.actor,
                left - 1,
            )
            return left
    return 0


class Outbox(CollectingHook):
    """A `UnitHook` for `Database.write_session`. With `off_loop`, the (blocking) send runs in
    a thread: a tick that submits 1,000 jobs does not hold up every other request meanwhile.
    With `detach` too, the unit of work does not wait for it either (its response leaves while
    the messages go; `drain` waits for those under way, at shutdown). With `send_async`, the
    detached send runs on the event loop instead of in a thread."""

    sends_messages = True
    """The event signal goes ahead of it (`calcgraph.workers.event_signal.attach_signal`)."""

    def __init__(
        self,
        send: Sender,
        send_many: BatchSender | None = None,
        *,
        off_loop: bool = False,
        detach: bool = False,
        send_async: AsyncBatchSender | None = None,
    ) -> None:
        self.send = send
        self.send_many = send_many if send_many is not None else partial(send_each, send)
        self.off_loop = off_loop
        self.detach = detach
        self.send_async = send_async
        self._sending: set[asyncio.Task[None]] = set()

    def collect(self) -> AbstractContextManager[list[Message]]:
        return collecting()

    async def committed(self, state: Any) -> None:
        _, buffer = state
        pending, buffer[:] = list(buffer), []
        if not pending:
            return
        if self.off_loop and self.detach:
            sending = (
                self._send_on_loop(pending)
                if self.send_async is not None
                else self._send_off_loop(pending)
            )
            task = asyncio.get_running_loop().create_task(sending)
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        elif self.off_loop:
            await self._send_off_loop(pending)
        else:
            self._send_now(pending)

    def _send_now(self, pending: list[Message]) -> None:
        # A message not sent leaves its row committed and `queued`: the sweeper re-sends it.
        # Failing the request here would tell the caller the job does not exist when it does.
        try:
            self.send_many(pending)
        except Exception:
            log.exception("could not send %d messages; the sweeper will re-send them", len(pending))

    async def _send_off_loop(self, pending: list[Message]) -> None:
        await asyncio.to_thread(self._send_now, pending)

    async def _send_on_loop(self, pending: list[Message]) -> None:
        assert self.send_async is not None
        try:
            await self.send_async(pending)
        except Exception:
            log.exception("could not send %d messages; the sweeper will re-send them", len(pending))

    async def drain(self) -> None:
        """Wait until the detached sends under way are done (before the broker closes)."""
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    def end(self, state: Any) -> None:
        _, buffer = state
        buffer.clear()  # after a rollback: the messages of rows that never existed
        super().end(state)


def attach(database: Database, outbox: Outbox) -> Outbox:
    """Give `database`'s write sessions `outbox` (replacing an earlier one: two outboxes would
    send every message twice)."""
    database.unit_hooks[:] = [h for h in database.unit_hooks if not isinstance(h, Outbox)]
    database.unit_hooks.append(outbox)
    return outbox
