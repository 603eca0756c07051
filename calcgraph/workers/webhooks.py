"""Webhook delivery in the worker processes (contract section 9), never on the API's event
loop nor on the job threads.

`WebhookTimer`, in every worker process: a round fans the newly numbered events out to the
webhooks that match them (one delivery row per webhook and event, in the unit of work that
moves the fan-out's cursor), leases the attempts due now and starts each on the runtime's event
loop, and every `event_prune_interval_seconds` deletes the events older than
`event_retention_days` (their deliveries with them). A round runs every
`webhook_dispatch_interval_seconds`, and at once (at most every `_MIN_ROUND_S`) when a unit of
this process recorded events or an attempt ended while others were due. Two processes' timers
never fan an event out twice (the cursor's guarded move) nor send one attempt twice at once
(the lease).

`Deliveries`: the attempts in flight, asynchronous on the runtime's loop: at most
`webhook_delivery_concurrency` at once, at most `webhook_delivery_per_webhook` of one webhook;
a webhook's attempts leased beyond its slots wait in its queue in this process, oldest first,
and each slot that frees takes the next (a few per slot, each sent well within its lease), so
a webhook kept busy by a steady stream sends its events in order, none left behind for seconds
while newer ones take the slots.
An attempt that waits for its receiver holds a socket and one of its webhook's slots, no
thread: a receiver that hangs for its 10 s delays neither the jobs (the Dramatiq threads never
send) nor another webhook's deliveries (its own slots are free).

One attempt: `calcgraph.workers.webhook_post.post`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from calcgraph.db.base import utcnow
from calcgraph.domain.events.destinations import AllowList
from calcgraph.domain.events.service import event_service
from calcgraph.domain.webhooks.delivery.service import (
    LEASE_SECONDS,
    Attempt,
    Outcome,
    Raced,
    due,
    fan_out,
    finish,
    prepare,
)
from calcgraph.domain.webhooks.repository import WebhookRepository
from calcgraph.workers.event_signal import observe
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sweeper import Timer
from calcgraph.workers.webhook_post import TIMEOUT_SECONDS, post

log = logging.getLogger("calcgraph.webhooks")
_FAN_OUT_ROUNDS = 20
_MIN_ROUND_S = 0.02
_UNHOOKED_ROUND_S = 5.0
"""With no webhook enabled at the last round, a round at most this often (nothing to deliver:
it only moves the fan-out's cursor and picks up a webhook created meanwhile), so that an idle
worker does not open two write transactions every `webhook_dispatch_interval_seconds`."""
"""Rounds woken by events come at most this often: a flood of events costs a round per
interval, not one per unit of work."""


async def deliver(
    runtime: WorkerRuntime, delivery_id: str, ready: Attempt | str | None = None
) -> str | None:
    """One leased attempt, start to end, on the runtime's loop; the delivery's state.
    `ready`: what the unit that wrote or leased it found to send, or why not (read now
    otherwise)."""
    settings = runtime.settings
    prepared: Attempt | str | None = ready
    if prepared is None:
        async with runtime.database.read_session() as session:
            prepared = await prepare(session, delivery_id)
    if prepared is None:
        return None
    if isinstance(prepared, str):
        result = Outcome(None, prepared, None, utcnow())
        return await _finish(runtime, delivery_id, result, final=True)
    result = await post(prepared, AllowList.parse(settings.webhook_allowed_hosts))
    state = await _finish(runtime, delivery_id, result)
    log.info(
        "webhook delivery %s attempt %d: %s (%s)",
        delivery_id,
        prepared.attempt,
        state,
        result.status_code if result.status_code is not None else result.error,
    )
    return state


async def _finish(
    runtime: WorkerRuntime, delivery_id: str, outcome: Outcome, *, final: bool = False
) -> str | None:
    async with runtime.database.write_session() as session:
        return await finish(
            session, delivery_id, outcome, runtime.settings.webhook_retry_schedule, final=final
        )


class Deliveries:
    """The attempts this process holds, used from the runtime's loop only: in flight, as
    tasks of that loop, at most `per_webhook` of one webhook; and leased to it, waiting in
    its webhook's queue, in the order they were leased (the fan-out's, oldest event first),
    for the next of that webhook's slots to end. A webhook holds at most `depth` in all, so
    that the last of them goes out well within its lease (`depth` attempts of at most
    `TIMEOUT_SECONDS` each, `per_webhook` at a time); the others wait in the table, and the
    fan-out queues a webhook's new attempts there behind them."""

    def __init__(
        self,
        runtime: WorkerRuntime,
        concurrency: int,
        per_webhook: int,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.runtime = runtime
        self.concurrency = concurrency
        self.per_webhook = per_webhook
        self.depth = per_webhook * max(1, int(lease_seconds // (2 * TIMEOUT_SECONDS)))
        self.in_flight: Counter[str] = Counter()
        self.queued: dict[str, deque[tuple[str, Attempt | str | None]]] = {}
        self.backlogged: set[str] = set()
        """Webhooks with attempts left in the table for `due` (a fan-out found them full or
        behind others): each refills its queue from there, oldest first, when it runs low."""
        self._refilling: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_done: list[Any] = []
        """Called (no arguments) when a webhook's attempts held here fall to half `depth`
        (and when its last ends): the timer comes back to lease more if more were due."""

    @property
    def room(self) -> int:
        """How many more attempts this process may hold (in flight or queued)."""
        return self.concurrency - len(self._tasks) - sum(len(q) for q in self.queued.values())

    def held(self) -> dict[str, int]:
        """Webhook id -> the attempts to it this process holds (in flight and queued)."""
        held = dict(self.in_flight)
        for webhook_id, queue in self.queued.items():
            held[webhook_id] = held.get(webhook_id, 0) + len(queue)
        return held

    def taker(self) -> Callable[[str], bool]:
        """For one fan-out: whether this process may hold one more attempt to a webhook now
        (counting those this fan-out took already)."""
        took: Counter[str] = Counter()
        room = self.room
        held = self.held()

        def take(webhook_id: str) -> bool:
            if room - took.total() <= 0:
                return False
            if held.get(webhook_id, 0) + took[webhook_id] >= self.depth:
                return False
            took[webhook_id] += 1
            return True

        return take

    def start(self, delivery_id: str, webhook_id: str, ready: Attempt | str | None = None) -> None:
        """Send it now if its webhook has a slot free, else after those queued before it."""
        queue = self.queued.get(webhook_id)
        if self.in_flight[webhook_id] >= self.per_webhook or queue:
            self.queued.setdefault(webhook_id, deque()).append((delivery_id, ready))
            return
        self.in_flight[webhook_id] += 1
        task = asyncio.get_running_loop().create_task(self._one(delivery_id, webhook_id, ready))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _one(self, delivery_id: str, webhook_id: str, ready: Attempt | str | None) -> None:
        try:
            while True:
                try:
                    await deliver(self.runtime, delivery_id, ready)
                except Exception:
                    # Its lease runs out and another round sends it again.
                    log.exception("webhook delivery %s failed; it is sent again later", delivery_id)
                queue = self.queued.get(webhook_id)
                if not queue:
                    break
                # The slot goes to the oldest queued for this webhook, never to a newer one.
                delivery_id, ready = queue.popleft()
                if not queue:
                    del self.queued[webhook_id]
                if self.in_flight[webhook_id] + len(queue) <= self.depth // 2:
                    self._refill(webhook_id)  # room for half a queue: lease more at once
        finally:
            self.in_flight[webhook_id] -= 1
            if self.in_flight[webhook_id] <= 0:
                del self.in_flight[webhook_id]
            self._refill(webhook_id)
            for callback in self.on_done:
                callback()

    def _refill(self, webhook_id: str) -> None:
        """Lease the oldest attempts waiting in the table for a backlogged webhook, up to
        `depth` held, in a unit of their own (the timer's round may be long)."""
        if webhook_id not in self.backlogged or webhook_id in self._refilling:
            return
        self._refilling.add(webhook_id)
        task = asyncio.get_running_loop().create_task(self._refilled(webhook_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refilled(self, webhook_id: str) -> None:
        try:
            want = self.depth - self.held().get(webhook_id, 0)
            if want <= 0:
                return
            settings = self.runtime.settings
            async with self.runtime.database.write_session() as session:
                leased, _ = await due(
                    session,
                    utcnow(),
                    settings.webhook_delivery_lease_seconds,
                    limit=want,
                    webhook=webhook_id,
                )
            if len(leased) < want:
                self.backlogged.discard(webhook_id)  # none left: fan-outs take again
            for item in leased:
                self.start(item.delivery_id, item.webhook_id, item.ready)
        except Exception:
            log.exception("leasing webhook %s's waiting attempts failed", webhook_id)
        finally:
            self._refilling.discard(webhook_id)

    async def close(self) -> None:
        """Stop the attempts under way and drop those queued (their leases run out; they are
        sent again later)."""
        self.queued.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class WebhookTimer(Timer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        settings = runtime.settings
        super().__init__(runtime, "calcgraph-webhooks", settings.webhook_dispatch_interval_seconds)
        self._pruned_at = -math.inf
        self._wake = threading.Event()
        self._more = False
        """Attempts were due that this process had no room for: come back when one ends."""
        self.deliveries = Deliveries(
            runtime,
            settings.webhook_delivery_concurrency,
            settings.webhook_delivery_per_webhook,
            settings.webhook_delivery_lease_seconds,
        )
        self.deliveries.on_done.append(self._attempt_ended)
        self._hooked = True
        """Some webhook was enabled at the last round: events recorded here wake the timer
        (with none, the interval's rounds pick up a webhook created meanwhile)."""
        self._unobserve = observe(self._event_recorded)
        self.rounds = 0

    def _event_recorded(self) -> None:
        if self._hooked:
            self._wake.set()

    def _attempt_ended(self) -> None:
        if self._more:
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            waiting = self.interval if self._hooked else max(self.interval, _UNHOOKED_ROUND_S)
            self._wake.wait(waiting)
            if self._stop.is_set():
                break
            self._wake.clear()
            try:
                self.tick()
            except Exception:
                log.exception("%s failed; it tries again in %s s", self._thread.name, self.interval)
            self._stop.wait(_MIN_ROUND_S)

    def stop(self) -> None:
        self._unobserve()
        self._stop.set()
        self._wake.set()
        super().stop()
        try:
            self.runtime.call(self.deliveries.close())
        except RuntimeError:  # the runtime's loop is gone already
            pass

    def tick(self) -> Any:
        return self.runtime.call(self.round())

    async def round(self) -> int:
        """One round: fan out, start what is due, prune when it is time. Returns the
        attempts started."""
        self.rounds += 1
        settings = self.runtime.settings
        deliveries = self.deliveries
        started = 0
        for _ in range(_FAN_OUT_ROUNDS):
            try:
                async with self.runtime.database.write_session() as session:
                    fanned = await fan_out(
                        session,
                        utcnow(),
                        deliveries.taker(),
                        settings.webhook_delivery_lease_seconds,
                    )
            except Raced:
                break
            # Attempts 1 this process had room for, leased to it in that unit: sent now,
            # without waiting for `due` to find them.
            for attempt in fanned.taken:
                deliveries.start(attempt.delivery_id, attempt.webhook_id, attempt)
            started += len(fanned.taken)
            deliveries.backlogged |= fanned.queued
            if fanned.events == 0:
                break
        async with self.runtime.database.write_session() as session:
            self._hooked = await WebhookRepository.from_session(session).any_enabled()
            leased, self._more = await due(
                session,
                utcnow(),
                settings.webhook_delivery_lease_seconds,
                limit=deliveries.room,
                room=deliveries.held(),
                per_webhook=deliveries.depth,
            )
        # After the lease's commit: another process's round now passes these by.
        for item in leased:
            deliveries.start(item.delivery_id, item.webhook_id, item.ready)
        if time.monotonic() - self._pruned_at >= settings.event_prune_interval_seconds:
            async with self.runtime.database.write_session() as session:
                pruned = await event_service.prune(session, settings.event_retention_days)
            self._pruned_at = time.monotonic()
            if pruned:
                log.info(
                    "deleted %d events older than %g days", pruned, settings.event_retention_days
                )
        return started + len(leased)
