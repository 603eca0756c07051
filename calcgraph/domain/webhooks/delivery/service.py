"""Getting events to webhooks, the workers' side (contract section 9, Delivery).

- `fan_out`: the events numbered since the fan-out's cursor, each matched against every
  enabled webhook whose owner may see it now (the subject's rules, in SQL), become attempt 1
  of a delivery (`pending`, due now), in the unit of work that moves the cursor: an event is
  fanned out once, and never lost (at least once).
- `due`: attempts due now are leased to this worker process (a killed worker's lease runs out
  and the attempt is sent again), at most as many as it has room for, and at most
  `per_webhook` in flight for one webhook: the process sends them after the commit, each on
  its own (`calcgraph.workers.webhooks`), so a receiver that hangs holds only its own slots.
- `prepare`/`finish`: one attempt: what to send (or why not: the webhook is gone, disabled,
  or its owner may no longer see the event), then its outcome: `delivered`, `retrying` with
  the next attempt written, or `failed` when the schedule is spent; 50 events failed in a row
  disable the webhook and record `calcgraph.webhook.disabled`.

A delivery row is one attempt. The next attempt (attempt 1 when fanned out, attempt n + 1 after
a `retrying` one) is written ahead, `pending`, due at `next_attempt_at`: it is the queue, not an
attempt made, and the listing (`GET /webhooks/{id}/deliveries`) shows only attempts made, each
`delivered`, `retrying` (its `next_attempt_at` says when the next one goes) or `failed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.repository import UserRepository
from calcgraph.domain.events.catalog import (
    WEBHOOK_DISABLED,
    WEBHOOK_TEST,
    TypeFilter,
    parse_types,
)
from calcgraph.domain.events.repository import EventRepository
from calcgraph.domain.events.schedule import MAX_FAILED_IN_A_ROW, retry_delay
from calcgraph.domain.events.service import record
from calcgraph.domain.events.views import EventView, event_view
from calcgraph.domain.webhooks.repository import WebhookRepository

FAN_OUT = "webhooks"
FAN_OUT_BATCH = 500
LEASE_SECONDS = 60.0
"""The default lease (`webhook_delivery_lease_seconds`): longer than an attempt can take
(10 s) plus the actor's queueing."""


def _owner(user_id: str, roles: Sequence[Any]) -> Principal:
    return Principal(
        user_id=user_id, subject="", username="", roles=frozenset(str(r) for r in roles)
    )


@dataclass
class FannedOut:
    events: int
    """How many positions the batch passed (0: nothing new), whether or not a webhook wanted
    their events."""
    taken: list[Attempt] = field(default_factory=list)
    """The attempts 1 written leased to the caller, ready to send after the commit."""
    queued: set[str] = field(default_factory=set)
    """The webhooks with attempts 1 written for `due` to lease (the caller had no room for
    them, or earlier attempts to the webhook were waiting)."""


async def fan_out(
    session: AsyncSession,
    now: datetime,
    take: Callable[[str], bool] | None = None,
    lease_seconds: float = LEASE_SECONDS,
) -> FannedOut:
    """Fan the next batch of events out. `take(webhook_id)`: whether the caller has room to
    send one more attempt to that webhook now; those it takes are written leased to it
    (`FannedOut.taken`: what to send, the webhook and the owner's sight checked here), the
    others wait for `due`. A webhook with attempts already waiting (due, unheld) takes none:
    its new attempts queue behind them, for `due` to lease oldest first (were they taken, a
    webhook kept full by a steady stream of events sent each new one at once while those that
    once found it full waited, seconds, for a round with a slot left). Raises `Raced` when
    another worker moved the cursor first (the unit then writes nothing)."""
    events = EventRepository.from_session(session)
    position = await events.cursor(FAN_OUT)
    # Every event numbered up to the sequencer's cursor has committed (they are numbered in
    # the unit that moves it): the batch is the next FAN_OUT_BATCH positions, of which only the
    # events some webhook wants are read. A flood of events no webhook asked for costs the
    # fan-out a cursor move per batch, not the loading of each event.
    end = await events.last_position()
    if end <= position:
        # The unit that recorded them numbers events in its own commit; one recorded by a
        # unit without the hook is numbered here.
        if not await events.sequence():
            return FannedOut(0)
        end = await events.last_position()
        if end <= position:
            return FannedOut(0)
    last = min(end, position + FAN_OUT_BATCH)
    webhooks = await WebhookRepository.from_session(session).enabled_with_owners()
    filters = {webhook.id: parse_types(webhook.types) for webhook, _ in webhooks}
    batch = (
        await events.page(
            None, position, FAN_OUT_BATCH, wanted_types(filters.values()), None, upto=last
        )
        if webhooks
        else []
    )
    until = now + timedelta(seconds=lease_seconds)
    waiting = (
        await WebhookRepository.from_session(session).waiting(now, [w.id for w, _ in webhooks])
        if take is not None and batch
        else set()
    )
    taken: list[Attempt] = []
    queued: set[str] = set()
    rows: list[dict[str, Any]] = []
    ids = [e.id for e in batch]
    seen: dict[str, set[str]] = {}
    for webhook, roles in webhooks:
        types = filters[webhook.id]
        # A test event goes to its webhook only, whatever types it asked for.
        wanted = [
            e
            for e in batch
            if (e.type == WEBHOOK_TEST and e.subject == webhook.id)
            or (e.type != WEBHOOK_TEST and types.matches(e.type))
        ]
        if not wanted:
            continue
        if webhook.user_id not in seen:
            seen[webhook.user_id] = await events.visible_ids(_owner(webhook.user_id, roles), ids)
        visible = seen[webhook.user_id]
        for event in wanted:
            if event.id in visible or event.type == WEBHOOK_TEST:
                delivery_id = new_id()
                row: dict[str, Any] = {
                    "id": delivery_id,
                    "webhook_id": webhook.id,
                    "event_id": event.id,
                    "type": event.type,
                    "attempt": 1,
                    "state": "pending",
                    "next_attempt_at": now,
                    "first_created_at": now,
                    "created_at": now,
                    "lease_until": None,
                }
                if take is not None and webhook.id not in waiting and take(webhook.id):
                    row["lease_until"] = until
                    view = event_view(event)
                    taken.append(
                        Attempt(delivery_id, webhook.id, webhook.url, webhook.secret, view, 1)
                    )
                else:
                    waiting.add(webhook.id)  # its later events queue behind this one
                    queued.add(webhook.id)
                rows.append(row)
    if not await events.move_cursor(FAN_OUT, position, last):
        raise Raced()
    await WebhookRepository.from_session(session).add_deliveries(rows)
    return FannedOut(last - position, taken, queued)


def wanted_types(filters: Iterable[TypeFilter]) -> TypeFilter:
    """The types some webhook of `filters` wants, and the test events (each sent to its own
    webhook whatever it asked for)."""
    exact: set[str] = {WEBHOOK_TEST}
    prefixes: list[str] = []
    for types in filters:
        if types.everything:
            return types
        exact |= types.exact
        prefixes += [p for p in types.prefixes if p not in prefixes]
    return TypeFilter(frozenset(exact), tuple(prefixes))


class Raced(Exception):
    """Another worker fanned this batch out first: roll this unit back."""


@dataclass(frozen=True)
class Leased:
    delivery_id: str
    webhook_id: str
    ready: Attempt | str | None = None
    """What to send (or why not, as `prepare`), read in the unit that leased it."""


async def due(
    session: AsyncSession,
    now: datetime,
    lease_seconds: float = LEASE_SECONDS,
    limit: int = 100,
    *,
    room: Mapping[str, int] | None = None,
    per_webhook: int | None = None,
    webhook: str | None = None,
) -> tuple[list[Leased], bool]:
    """Lease for `lease_seconds` up to `limit` attempts due now, at most `per_webhook` of one
    webhook beyond those it already has in flight (`room`: webhook id -> in flight); of
    `webhook` only, when given. Returns
    them, and whether more were due than leased, its full webhooks' included (the caller
    comes back once it has room, or once one of their attempts ends)."""
    repository = WebhookRepository.from_session(session)
    in_flight = dict(room or {})
    full = [w for w, n in in_flight.items() if n >= per_webhook] if per_webhook is not None else []
    leased: list[Leased] = []
    more = False
    until = now + timedelta(seconds=lease_seconds)
    if limit <= 0:
        return leased, await repository.any_due(now)
    found = await repository.due(now, limit, exclude=full, webhook=webhook)
    for delivery_id, webhook_id in found:
        if per_webhook is not None and in_flight.get(webhook_id, 0) >= per_webhook:
            more = True
            continue
        if await repository.lease(delivery_id, now, until):
            leased.append(Leased(delivery_id, webhook_id))
            in_flight[webhook_id] = in_flight.get(webhook_id, 0) + 1
    if len(found) >= limit:
        more = True
    elif full and not more and webhook is None:
        # The full webhooks' attempts were not asked for: one waiting is more to come back for
        # when a slot frees (those leased here are held now, so not found again).
        more = await repository.any_due(now)
    if leased:
        # Read here, a few statements for all, not one read unit per attempt before its POST.
        ready = await prepare_many(session, [item.delivery_id for item in leased])
        leased = [Leased(i.delivery_id, i.webhook_id, ready.get(i.delivery_id)) for i in leased]
    return leased, more


@dataclass(frozen=True)
class Attempt:
    delivery_id: str
    webhook_id: str
    url: str
    secret: str
    event: EventView
    attempt: int


async def prepare(session: AsyncSession, delivery_id: str) -> Attempt | str | None:
    """What to send; a reason (str) when it must not be sent; None when it is not pending."""
    repository = WebhookRepository.from_session(session)
    found = await repository.attempt(delivery_id)
    if found is None:
        return None
    delivery, webhook, event = found
    if delivery.state != "pending":
        return None
    if not webhook.enabled:
        return "the webhook is disabled"
    if event.type != WEBHOOK_TEST:
        roles = await _roles(session, webhook.user_id)
        visible = await EventRepository.from_session(session).visible_ids(
            _owner(webhook.user_id, roles), [event.id]
        )
        if event.id not in visible:
            return "the webhook's owner may no longer see this event"
    return Attempt(
        delivery.id, webhook.id, webhook.url, webhook.secret, event_view(event), delivery.attempt
    )


async def prepare_many(
    session: AsyncSession, delivery_ids: Sequence[str]
) -> dict[str, Attempt | str]:
    """`prepare` for several deliveries: the deliveries in one statement, then each webhook
    owner's roles and sight once. A delivery no longer pending is left out."""
    events = EventRepository.from_session(session)
    prepared: dict[str, Attempt | str] = {}
    owners: dict[str, list[tuple[Any, Any, Any]]] = {}
    for delivery, webhook, event in await WebhookRepository.from_session(session).attempts(
        delivery_ids
    ):
        if delivery.state != "pending":
            continue
        if not webhook.enabled:
            prepared[delivery.id] = "the webhook is disabled"
        elif event.type == WEBHOOK_TEST:
            prepared[delivery.id] = _attempt(delivery, webhook, event)
        else:
            owners.setdefault(webhook.user_id, []).append((delivery, webhook, event))
    for user_id, found in owners.items():
        owner = _owner(user_id, await _roles(session, user_id))
        visible = await events.visible_ids(owner, [event.id for _, _, event in found])
        for delivery, webhook, event in found:
            prepared[delivery.id] = (
                _attempt(delivery, webhook, event)
                if event.id in visible
                else "the webhook's owner may no longer see this event"
            )
    return prepared


async def _roles(session: AsyncSession, user_id: str) -> list[Any]:
    user = await UserRepository.from_session(session).get(user_id)
    return list(user.roles or []) if user is not None else []


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: int | None
    attempted_at: datetime

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def finish(
    session: AsyncSession,
    delivery_id: str,
    outcome: Outcome,
    schedule: Sequence[float],
    *,
    final: bool = False,
) -> str | None:
    """Record an attempt's outcome; the delivery's state, or None when another worker
    recorded this attempt already. `final`: no retry (the attempt must not be sent)."""
    repository = WebhookRepository.from_session(session)
    found = await repository.attempt(delivery_id)
    if found is None:
        return None
    delivery, webhook, _ = found
    state = "delivered"
    next_at: datetime | None = None
    if not outcome.delivered:
        delay = None if final else retry_delay(schedule, delivery.attempt)
        if delay is not None:
            state, next_at = "retrying", outcome.attempted_at + timedelta(seconds=delay)
        else:
            state = "failed"
    values = {
        "state": state,
        "status_code": outcome.status_code,
        "error": outcome.error,
        "duration_ms": outcome.duration_ms,
        "attempted_at": outcome.attempted_at,
        "next_attempt_at": next_at,
    }
    if not await repository.record(delivery_id, values):
        return None
    if state == "retrying":
        assert next_at is not None
        await repository.add_deliveries(
            [
                {
                    "id": new_id(),
                    "webhook_id": delivery.webhook_id,
                    "event_id": delivery.event_id,
                    "type": delivery.type,
                    "attempt": delivery.attempt + 1,
                    "state": "pending",
                    "next_attempt_at": next_at,
                    "first_created_at": delivery.first_created_at,
                    "created_at": outcome.attempted_at,
                }
            ]
        )
    elif delivery.type != WEBHOOK_TEST:
        in_a_row = await repository.count_failure(webhook.id, state == "failed")
        if in_a_row >= MAX_FAILED_IN_A_ROW and await repository.disable(webhook.id):
            await record(
                session,
                WEBHOOK_DISABLED,
                webhook.id,
                {"webhook_id": webhook.id, "url": webhook.url},
            )
    return state


def _attempt(delivery: Any, webhook: Any, event: Any) -> Attempt:
    """The attempt to send as its rows give it."""
    return Attempt(
        delivery.id, webhook.id, webhook.url, webhook.secret, event_view(event), delivery.attempt
    )
