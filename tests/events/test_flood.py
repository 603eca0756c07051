"""1,000 events recorded in one second (issue 23's hostile case): every one is numbered, read
back whole in pages of 500 in the order of its cursor, none lost, none twice, a long-poll that
waited from `now` sees them all, and ticks and executes meanwhile answer as usual. (How much
the flood slows them is measured by `python -m bench events_flood_http`.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.service import event_row, record_rows
from tests.events.helpers import events, published
from tests.execution.conftest import Platform

pytestmark = pytest.mark.db
UNITS = 20
PER_UNIT = 50


async def _flood(platform: Platform, user_id: str) -> None:
    """20 units of work of 50 events each, at once (as many processes' would be)."""

    async def unit(n: int) -> None:
        rows = [
            event_row(USER_LOGIN, user_id, {"username": "alice", "flood": n * PER_UNIT + i})
            for i in range(PER_UNIT)
        ]
        async with platform.database.write_session() as session:
            await record_rows(session, rows)

    await asyncio.gather(*(unit(n) for n in range(UNITS)))


async def _all_after(platform: Platform, cursor: str) -> tuple[list[dict[str, Any]], list[int]]:
    items: list[dict[str, Any]] = []
    cursors = [int(cursor)]
    while True:
        page = await events(platform, after=cursor, limit=500, type=USER_LOGIN)
        assert len(page["items"]) <= 500
        if not page["items"]:
            return items, cursors
        items += page["items"]
        cursor = page["next_cursor"]
        cursors.append(int(cursor))


async def test_a_thousand_events_in_a_second_are_all_read_in_order(platform: Platform) -> None:
    alice = await platform.user("alice")
    report = await published(platform)
    start = (await events(platform, after="now"))["next_cursor"]
    waiting = asyncio.create_task(
        events(platform, after=start, wait=25, type=USER_LOGIN, limit=500)
    )
    await asyncio.sleep(0.2)
    flooding = asyncio.create_task(_flood(platform, alice.user_id))
    # Executes answer while the flood is recorded.
    executed = await platform.execute(
        f"/packages/{report['package_id']}/functions/run/execute", {"x": 3.0}, wait=20
    )
    await flooding
    assert executed.status_code == 200, executed.text
    assert executed.json()["status"] == "success"

    first = await waiting
    assert first["items"], "the long-poll did not wake"
    items, cursors = await _all_after(platform, start)
    floods = [e["data"]["flood"] for e in items if "flood" in e["data"]]
    assert sorted(floods) == list(range(UNITS * PER_UNIT))  # none lost, none twice
    assert len({e["id"] for e in items}) == len(items)
    assert cursors == sorted(cursors)
    assert len(set(cursors)) == len(cursors)
    # The long-poll's page is the head of the same order.
    assert [e["id"] for e in first["items"]] == [e["id"] for e in items[: len(first["items"])]]
    # Bob sees none of alice's logins.
    await platform.user("bob")
    bobs = await events(platform, "bob", after=start, limit=500, type=USER_LOGIN)
    assert bobs["items"] == []
