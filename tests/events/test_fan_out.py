"""The webhook fan-out (contract section 9, Delivery) on its own, on both databases: it reads
only the events some enabled webhook wants (a flood of events no webhook asked for, issue 23's
hostile case, is passed over by its positions, never loaded), fans each wanted one out once,
and sends a test event to its own webhook whatever types that webhook asked for."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.access.models import User
from calcgraph.domain.events.catalog import RUN_CREATED, USER_LOGIN, WEBHOOK_TEST, parse_types
from calcgraph.domain.events.models import Webhook, WebhookDelivery
from calcgraph.domain.events.repository import EventRepository
from calcgraph.domain.events.service import event_row, event_service, record_rows
from calcgraph.domain.webhooks.delivery.service import (
    FAN_OUT,
    FAN_OUT_BATCH,
    FannedOut,
    fan_out,
    wanted_types,
)

pytestmark = pytest.mark.db


async def _user(database: Database, name: str) -> str:
    async with database.write_session() as session:
        user = User(subject=f"sub-{name}", username=name, roles=[])
        session.add(user)
        await session.flush()
        return user.id


async def _webhook(database: Database, user_id: str, types: list[str]) -> str:
    async with database.write_session() as session:
        hook = Webhook(
            user_id=user_id, url="https://hooks.example.com/in", types=types, secret="whsec_x"
        )
        session.add(hook)
        await session.flush()
        return hook.id


async def _record(database: Database, rows: list[dict[str, Any]]) -> None:
    async with database.write_session() as session:
        await record_rows(session, rows)
        await event_service.sequence_all(session)


async def _fan_out(database: Database) -> tuple[FannedOut, set[str]]:
    """One batch; the types of the events it read (the rows the repository's page returned:
    a page reads table rows, not mapped events)."""
    loaded: set[str] = set()
    page = EventRepository.page

    async def reading(self: EventRepository, *args: Any, **kwargs: Any) -> Any:
        rows = await page(self, *args, **kwargs)
        loaded.update(row.type for row in rows)
        return rows

    EventRepository.page = reading  # type: ignore[method-assign]
    try:
        async with database.write_session() as session:
            fanned = await fan_out(session, utcnow())
    finally:
        EventRepository.page = page  # type: ignore[method-assign]
    return fanned, loaded


async def _passed_over(database: Database) -> None:
    """The cursor moved past what is committed already: events other tests committed outside
    their rolled-back transaction (tests/events/test_busy_subscription.py) are not this test's."""
    while (await _fan_out(database))[0].events:
        pass


async def _deliveries(database: Database, *hooks: str) -> list[tuple[str, str]]:
    """(webhook, event) of every delivery written to these webhooks."""
    async with database.read_session() as session:
        rows = await session.execute(
            select(WebhookDelivery.webhook_id, WebhookDelivery.event_id).where(
                WebhookDelivery.webhook_id.in_(hooks)
            )
        )
        return sorted((str(w), str(e)) for w, e in rows)


async def test_events_no_webhook_wants_are_passed_over_unread(database: Database) -> None:
    await _passed_over(database)
    alice = await _user(database, "alice")
    hook = await _webhook(database, alice, [USER_LOGIN])
    unwanted = FAN_OUT_BATCH + 100
    rows = [event_row(RUN_CREATED, f"run-{i}", {"n": i}) for i in range(unwanted)]
    logins = [event_row(USER_LOGIN, alice, {"username": "alice", "n": i}) for i in range(3)]
    # Two logins among the first batch's positions, one in the second's.
    await _record(database, rows[:10] + logins[:2] + rows[10:unwanted])
    await _record(database, [logins[2]])
    passed, loaded_types = 0, set[str]()
    while True:
        fanned, loaded = await _fan_out(database)
        loaded_types |= loaded
        if fanned.events == 0:
            break
        assert fanned.events <= FAN_OUT_BATCH
        passed += fanned.events
    assert passed == unwanted + len(logins)
    # Only what the webhook wants (and test events) was read.
    assert loaded_types == {USER_LOGIN}
    async with database.read_session() as session:
        events = EventRepository.from_session(session)
        assert await events.cursor(FAN_OUT) == await events.last_position()
    assert await _deliveries(database, hook) == sorted((hook, row["id"]) for row in logins)


async def test_a_test_event_goes_to_its_own_webhook_whatever_its_types(
    database: Database,
) -> None:
    await _passed_over(database)
    alice = await _user(database, "alice")
    jobs_only = await _webhook(database, alice, ["calcgraph.job.*"])
    other = await _webhook(database, alice, ["calcgraph.job.*"])
    test = event_row(WEBHOOK_TEST, jobs_only, {"webhook_id": jobs_only})
    login = event_row(USER_LOGIN, alice, {"username": "alice"})
    await _record(database, [test, login])
    fanned, loaded = await _fan_out(database)
    assert fanned.events == 2
    assert loaded == {WEBHOOK_TEST}
    # Neither the login (no webhook wants it) nor the other webhook's copy of the test.
    assert await _deliveries(database, jobs_only, other) == [(jobs_only, test["id"])]


async def test_with_no_webhook_the_cursor_moves_past_every_event(database: Database) -> None:
    await _passed_over(database)
    alice = await _user(database, "alice")
    await _record(database, [event_row(USER_LOGIN, alice, {"username": "alice"})])
    fanned, loaded = await _fan_out(database)
    assert fanned.events == 1
    assert loaded == set()
    assert (await _fan_out(database))[0].events == 0


def test_the_wanted_types_are_every_webhooks_and_the_test_events() -> None:
    wanted = wanted_types([parse_types(["calcgraph.job.*"]), parse_types([USER_LOGIN])])
    assert wanted.matches(USER_LOGIN)
    assert wanted.matches("calcgraph.job.succeeded")
    assert wanted.matches(WEBHOOK_TEST)
    assert not wanted.matches(RUN_CREATED)
    assert wanted_types([parse_types(["*"]), parse_types([USER_LOGIN])]).everything
    assert wanted_types([]).matches(WEBHOOK_TEST)
    assert not wanted_types([]).matches(USER_LOGIN)
