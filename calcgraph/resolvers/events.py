"""The event log's query and subscription: thin calls into the event feed (the same one
`GET /events` calls)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.events.feed.service import MAX_WAIT
from calcgraph.domain.events.service import DEFAULT_LIMIT, parse_query
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.events import CloudEventType, EventPageType


@strawberry.type
class EventQuery:
    @strawberry.field(
        description="Events the caller may see, in recorded order, after `after` (a cursor, or "
        "`now`); `types` are event types or prefixes ending in `*`. With `wait` (0-30 s), a "
        "call that finds nothing answers as soon as a matching event is recorded."
    )
    async def events(
        self,
        info: Info,
        types: list[str] | None = None,
        subject: str | None = None,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        wait: float = 0.0,
    ) -> EventPageType:
        principal = principal_of(info)
        if not 0 <= wait <= MAX_WAIT:
            raise ValidationError(
                f"wait must be a number of seconds from 0 to {MAX_WAIT:g}",
                [FieldError(("wait",), f"a number from 0 to {MAX_WAIT:g}")],
            )
        query = parse_query(types or [], subject, after, limit)
        page = await info.context.services.events.pull(principal, query, wait)
        return EventPageType(
            items=[CloudEventType.from_view(item) for item in page.items],
            next_cursor=page.next_cursor,
        )


@strawberry.type
class EventSubscription:
    @strawberry.subscription(
        description="Each event the subscriber may see, as it is recorded (from now on), of "
        "these `types` (event types or prefixes ending in `*`; none: all) and `subject`."
    )
    async def events(
        self, info: Info, types: list[str] | None = None, subject: str | None = None
    ) -> AsyncGenerator[CloudEventType, None]:
        principal = principal_of(info)
        query = parse_query(types or [], subject, "now", DEFAULT_LIMIT)
        async for view in info.context.services.events.follow(principal, query):
            yield CloudEventType.from_view(view)
