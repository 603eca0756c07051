"""A read of the event log from its end (a follower that has read everything, woken or not)
reads the log's head and no page: nothing is numbered past its cursor, so the page would be
empty. In issue 23's flood a follower woken by each unit that recorded events read an empty
page after each full one: half its reads."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import event

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.feed.service import EventFeed
from calcgraph.domain.events.service import event_row, parse_query, record_rows
from calcgraph.workers.notify import LocalNotifier

ADMIN = Principal("u-admin", "s-admin", "root", frozenset({"admin", "user"}))
ALICE = Principal("u-alice", "s-alice", "alice", frozenset({"user"}))


async def _login(database: Database, subject: str) -> None:
    async with database.write_session() as session:
        await record_rows(session, [event_row(USER_LOGIN, subject, {"username": "alice"})])


@pytest.mark.db
async def test_a_read_at_the_log_end_reads_no_page(database: Database) -> None:
    pages: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().startswith("SELECT events.id, events.position"):
            pages.append(statement)

    feed = EventFeed(database, LocalNotifier())
    await _login(database, "u-alice")
    end = (await feed.pull(ADMIN, parse_query([], None, "now", None))).next_cursor
    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        for principal in (ADMIN, ALICE):
            at_end = await feed.pull(principal, parse_query([], None, end, None))
            assert (at_end.items, at_end.next_cursor) == ([], end)
        assert pages == []
        # A cursor past the end (one the log has not reached) answers as it did: no events,
        # the same cursor back.
        ahead = str(int(end) + 5)
        past = await feed.pull(ALICE, parse_query([], None, ahead, None))
        assert (past.items, past.next_cursor, pages) == ([], ahead, [])

        other = str(uuid.uuid4())
        await _login(database, "u-alice")
        await _login(database, other)
        # Numbered by the first read (recorded without the unit hook), then read as a page:
        # alice sees her own login, not the other user's.
        found = await feed.pull(ALICE, parse_query([], None, end, None))
        assert [item.subject for item in found.items] == ["u-alice"]
        assert int(found.next_cursor) == int(end) + 1
        assert len(pages) == 1
        # Past alice's login the log holds the other user's: a page is read, and is empty.
        rest = await feed.pull(ALICE, parse_query([], None, found.next_cursor, None))
        assert (rest.items, len(pages)) == ([], 2)
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
        await feed.close()
