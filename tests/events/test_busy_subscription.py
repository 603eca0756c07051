"""A subscription is a stream a run page holds open: when its API process's database queue is
full for a moment, its next read waits out the `retry_after` and goes on, instead of ending the
stream with `Unavailable` (200 run pages opening at once ended 139 of their subscriptions so,
in `bench/event_pages.py`). A pull (`GET /events`, the `events` query) is still refused at once:
its client retries after Retry-After."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from calcgraph.db.dialect import is_retryable
from calcgraph.db.engine import Database, Overloaded
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.events.feed.service import EventFeed
from calcgraph.domain.events.service import event_row, event_service, parse_query, record_rows
from calcgraph.settings import Settings
from calcgraph.workers.notify import LocalNotifier

pytestmark = pytest.mark.db
ADMIN = Principal("u-admin", "s-admin", "root", frozenset({"admin", "user"}))


@pytest.fixture
def postgres_url(database_url: str) -> str:
    if not database_url.startswith("postgresql"):
        pytest.skip("the admission queue is PostgreSQL's pool (SQLite has none)")
    return database_url


async def test_a_busy_database_delays_a_subscription_and_does_not_end_it(
    postgres_url: str,
) -> None:
    settings = Settings(
        database_url=postgres_url,
        database_pool_size=1,
        database_max_overflow=0,
        database_queue_limit=0,
    )
    api = Database.from_settings(settings)  # an API process's: one connection, no queue
    workers = Database.from_settings(settings, queue=False)
    signals = LocalNotifier()
    feed = EventFeed(api, signals, recheck=3600)  # woken by the signal alone
    release, held = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with api.read_session() as session:
            await session.connection()
            held.set()
            await release.wait()

    query = parse_query(["calcgraph.user.login"], None, "now", None)
    stream = feed.follow(ADMIN, query)
    following = asyncio.create_task(anext(stream))
    holder: asyncio.Task[None] | None = None
    try:
        await asyncio.sleep(0.5)  # it read where the log ends and waits for an event
        assert not following.done()
        holder = asyncio.create_task(hold())
        await asyncio.wait_for(held.wait(), 10)
        # The pool's one connection is taken: a pull is refused at once, as a request is.
        with pytest.raises(Overloaded) as refused:
            await feed.pull(ADMIN, parse_query(["calcgraph.user.login"], None, None, None))
        assert is_retryable(refused.value)
        subject = str(uuid.uuid4())
        async with workers.write_session() as session:
            await record_rows(
                session, [event_row("calcgraph.user.login", subject, {"username": "x"})]
            )
            await event_service.sequence(session)  # numbered in its unit, as the hook does
        signals.publish_events(["calcgraph.user.login"])  # as the recording unit's hook does
        await asyncio.sleep(1.5)  # woken, its read was refused: it waits, and tries again
        assert not following.done(), following  # still waiting, not ended by `Unavailable`
        release.set()
        view = await asyncio.wait_for(following, 40)
        assert (view.type, view.subject) == ("calcgraph.user.login", subject)
    finally:
        release.set()
        if holder is not None:
            await holder
        following.cancel()
        await stream.aclose()
        await feed.close()
        await api.dispose()
        await workers.dispose()
