"""Attempts to one webhook go out oldest first (contract section 9, Delivery), on both
databases: an event fanned out while its webhook had no slot left waits for `due`, and an
event fanned out after it, once a slot is free, does not jump ahead of it (with a steady
stream of events, as in bench `events_delivery_http`, the new ones took every slot that freed
and the waiting ones went out seconds late); and `due` says attempts are left when they wait
for a webhook that is full, so the worker comes back when one of its attempts ends. In the
worker, a webhook's attempts beyond its slots wait in its queue and each slot that frees takes
the oldest."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from sqlalchemy import select

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.access.models import User
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.models import Webhook, WebhookDelivery
from calcgraph.domain.events.service import event_row, event_service, record_rows
from calcgraph.domain.webhooks.delivery.service import FannedOut, Leased, due, fan_out
from calcgraph.workers import webhooks
from calcgraph.workers.webhooks import Deliveries


async def _webhook(database: Database) -> tuple[str, str]:
    """(alice, her webhook for her logins)."""
    async with database.write_session() as session:
        user = User(subject="sub-alice", username="alice", roles=[])
        session.add(user)
        await session.flush()
        hook = Webhook(
            user_id=user.id, url="https://hooks.example.com/in", types=[USER_LOGIN], secret="s"
        )
        session.add(hook)
        await session.flush()
        return user.id, hook.id


async def _login(database: Database, alice: str) -> str:
    row = event_row(USER_LOGIN, alice, {"username": "alice"})
    async with database.write_session() as session:
        await record_rows(session, [row])
        await event_service.sequence_all(session)
    return str(row["id"])


async def _fan_out(database: Database, room: bool) -> FannedOut:
    async with database.write_session() as session:
        return await fan_out(session, utcnow(), lambda webhook_id: room)


async def _due(database: Database, in_flight: dict[str, int]) -> tuple[list[Leased], bool]:
    async with database.write_session() as session:
        return await due(session, utcnow(), limit=10, room=in_flight, per_webhook=1)


async def _event_of(database: Database, leased: Leased) -> Any:
    async with database.read_session() as session:
        return await session.scalar(
            select(WebhookDelivery.event_id).where(WebhookDelivery.id == leased.delivery_id)
        )


@pytest.mark.db
async def test_a_new_attempt_does_not_jump_ahead_of_one_waiting(database: Database) -> None:
    alice, hook = await _webhook(database)
    first = await _login(database, alice)
    # The webhook is full: the first login's attempt waits for `due`.
    assert (await _fan_out(database, room=False)).taken == []
    second = await _login(database, alice)
    # A slot is free now, but the first login waits: the second goes behind it.
    fanned = await _fan_out(database, room=True)
    assert [a.event.id for a in fanned.taken] == []
    leased, more = await _due(database, {})
    assert [await _event_of(database, one) for one in leased] == [first]
    assert more  # the second waits for the slot the first holds
    leased, more = await _due(database, {})
    assert [await _event_of(database, one) for one in leased] == [second]
    assert not more
    assert fanned.queued == {hook}


@pytest.mark.db
async def test_due_says_attempts_wait_for_a_full_webhook(database: Database) -> None:
    alice, hook = await _webhook(database)
    await _login(database, alice)
    assert (await _fan_out(database, room=False)).taken == []
    # The webhook's one slot is held: nothing is leased, but the worker must come back when
    # that attempt ends.
    leased, more = await _due(database, {hook: 1})
    assert leased == []
    assert more
    leased, more = await _due(database, {})
    assert len(leased) == 1
    assert not more


async def test_a_webhooks_slot_goes_to_its_oldest_queued_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []
    answer: dict[str, asyncio.Event] = {}

    async def deliver(runtime: Any, delivery_id: str, ready: Any = None) -> str:
        sent.append(delivery_id)
        answer[delivery_id] = asyncio.Event()
        await answer[delivery_id].wait()
        return "delivered"

    monkeypatch.setattr(webhooks, "deliver", deliver)
    deliveries = Deliveries(cast(Any, None), concurrency=64, per_webhook=1, lease_seconds=60.0)
    assert deliveries.depth == 3  # three attempts of 10 s at most, well within a lease
    take = deliveries.taker()
    assert [take("w") for _ in range(4)] == [True, True, True, False]
    for delivery_id in ("d1", "d2", "d3"):
        deliveries.start(delivery_id, "w")
    await asyncio.sleep(0)
    assert (sent, dict(deliveries.in_flight)) == (["d1"], {"w": 1})
    assert not deliveries.taker()("w")  # it holds three already
    for delivery_id in ("d1", "d2"):
        answer[delivery_id].set()
        for _ in range(3):
            await asyncio.sleep(0)
    assert sent == ["d1", "d2", "d3"]
    assert dict(deliveries.in_flight) == {"w": 1}
    answer["d3"].set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert (dict(deliveries.in_flight), deliveries.queued) == ({}, {})
