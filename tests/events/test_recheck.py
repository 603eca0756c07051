"""The feed's one re-check per process (`calcgraph.domain.events.feed.watch`): a wake-up that
was lost (a unit of work recorded events without the hook) still reaches the readers its
events concern, and only those: a reader of another run or type, or one that already read
past them, sleeps on."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.events.catalog import parse_types
from calcgraph.domain.events.feed.service import EventFeed
from calcgraph.domain.events.feed.watch import Digest, Watch
from calcgraph.domain.events.service import event_row, parse_query, record_rows
from calcgraph.workers.notify import LocalNotifier

JOBS = parse_types(["calcgraph.job.*"]).matches
LOGINS = parse_types(["calcgraph.user.login"]).matches
ADMIN = Principal("u-admin", "s-admin", "root", frozenset({"admin", "user"}))


async def test_a_round_wakes_the_readers_the_new_events_concern() -> None:
    numbered: list[int] = []

    async def number() -> None:
        numbered.append(1)

    async def end() -> int:
        return 10

    asked: list[tuple[int, int]] = []

    async def digest(after: int, upto: int) -> Digest:
        asked.append((after, upto))
        return [("calcgraph.job.succeeded", "r1", 8), ("calcgraph.user.login", None, 6)]

    watch = Watch(number, end, digest, lambda: 3600.0)
    flags = {name: asyncio.Event() for name in ("r1", "r2", "any-job", "read", "login", "new")}
    with (
        watch.reading(JOBS, "r1", flags["r1"]) as r1,
        watch.reading(JOBS, "r2", flags["r2"]) as r2,
        watch.reading(JOBS, None, flags["any-job"]) as any_job,
        watch.reading(JOBS, "r1", flags["read"]) as read,
        watch.reading(LOGINS, None, flags["login"]) as login,
        watch.reading(JOBS, "r1", flags["new"]),  # still on its first read: left alone
    ):
        for reader in (r1, r2, any_job, login):
            reader.seen = 5
        read.seen = 8  # it read past the job's event already (its signal was not lost)
        await watch.round()
        await asyncio.sleep(0)
        woken = {name for name, flag in flags.items() if flag.is_set()}
        assert woken == {"r1", "any-job", "login"}
        assert numbered == [1]
        assert asked == [(5, 10)]
        # Not concerned: seen up to the end, so the next round does not look back.
        assert (r2.seen, read.seen) == (10, 10)
        assert (r1.seen, any_job.seen, login.seen) == (5, 5, 5)
    await watch.close()


@pytest.mark.db
async def test_a_lost_wake_up_reaches_a_waiting_poll(database: Database) -> None:
    """The unit below records without the hook (no signal at all): the re-check finds it."""
    feed = EventFeed(database, LocalNotifier(), recheck=0.2)
    try:
        query = parse_query(["calcgraph.user.login"], None, "now", None)
        poll = asyncio.create_task(feed.pull(ADMIN, query, wait=20))
        await asyncio.sleep(0.5)
        assert not poll.done()
        subject = str(uuid.uuid4())
        async with database.write_session() as session:
            await record_rows(
                session, [event_row("calcgraph.user.login", subject, {"username": "x"})]
            )
        page = await asyncio.wait_for(poll, 15)
        assert [(e.type, e.subject) for e in page.items] == [("calcgraph.user.login", subject)]
    finally:
        await feed.close()
