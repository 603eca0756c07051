"""The event log's query and subscription: thin calls into the event feed (the same one
`GET /events` calls)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Unpack

import strawberry

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.events.feed.service import MAX_WAIT
from calcgraph.domain.events.service import DEFAULT_LIMIT, parse_query
from calcgraph.resolvers.arguments import EventFilter, arguments
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.events import CloudEventType, EventPageType

RECENT_LIMIT = 20
MAX_RECENT = 100


def _require_within(field: str, value: float, low: float, high: float, told: str) -> None:
    """A `field` outside `low`..`high` is refused as `{field} must be {told}`."""
    if not low <= value <= high:
        raise ValidationError(
            f"{field} must be {told}", [FieldError((field,), f"a number from {low:g} to {high:g}")]
        )


def _filter(which: EventFilter, after: str | None) -> tuple[list[str], str | None, str | None]:
    """`parse_query`'s first arguments: the types (none: all), the subject, `after`."""
    return which.get("types") or [], which.get("subject"), after


@strawberry.type
class EventQuery:
    @strawberry.field(
        description="Events the caller may see, in recorded order, after `after` (a cursor, or "
        "`now`); `types` are event types or prefixes ending in `*`. With `wait` (0-30 s), a "
        "call that finds nothing answers as soon as a matching event is recorded. `run` (a "
        "workflow run id) keeps that run's own events and its jobs' (NOT_FOUND for a run the "
        "caller may not see)."
    )
    @arguments(EventFilter, after="info")
    async def events(
        self,
        info: Info,
        limit: int = DEFAULT_LIMIT,
        wait: float = 0.0,
        run: strawberry.ID | None = None,
        **which: Unpack[EventFilter],
    ) -> EventPageType:
        principal = principal_of(info)
        _require_within("wait", wait, 0, MAX_WAIT, f"a number of seconds from 0 to {MAX_WAIT:g}")
        query = parse_query(*_filter(which, which.get("after")), limit, run)
        page = await info.context.services.events.pull(principal, query, wait)
        return EventPageType.from_page(page)

    @strawberry.field(
        description="The newest `limit` (1-100) events the caller may see of these `types`, "
        "newest first (a notifications list). `nextCursor` is the end they were read at: the "
        "`events` subscription with `after` set to it follows on, missing and repeating none."
    )
    async def recent_events(
        self, info: Info, types: list[str] | None = None, limit: int = RECENT_LIMIT
    ) -> EventPageType:
        principal = principal_of(info)
        _require_within("limit", limit, 1, MAX_RECENT, f"from 1 to {MAX_RECENT}")
        query = parse_query(types or [], None, "now", limit)
        page = await info.context.services.events.recent(principal, query)
        return EventPageType.from_page(page)


@strawberry.type
class EventSubscription:
    @strawberry.subscription(
        description="Each event the subscriber may see, as it is recorded (from now on), of "
        "these `types` (event types or prefixes ending in `*`; none: all) and `subject`. "
        "`after` (a cursor of the `events` or `recentEvents` query) starts after it instead: "
        "nothing recorded between that answer and the subscription is missed. `run` (a "
        "workflow run id) keeps that run's own events and its jobs' (a run page): the "
        "subscriber is not even woken by other runs' (NOT_FOUND for a run it may not see)."
    )
    @arguments(EventFilter, after="info")
    async def events(
        self, info: Info, run: strawberry.ID | None = None, **which: Unpack[EventFilter]
    ) -> AsyncGenerator[CloudEventType, None]:
        principal = principal_of(info)
        query = parse_query(*_filter(which, which.get("after") or "now"), DEFAULT_LIMIT, run)
        async for view in info.context.services.events.follow(principal, query):
            yield CloudEventType.from_view(view)
