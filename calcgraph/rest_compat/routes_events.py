"""The event log's pull (contract section 9): `GET /events`, a long-poll with `wait`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from calcgraph.domain.events.envelope import structured
from calcgraph.domain.events.feed.service import MAX_WAIT
from calcgraph.domain.events.service import DEFAULT_LIMIT, MAX_LIMIT, parse_query
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.parsing import (
    BlankIsAbsent,
    Query,
    Refusal,
    page_size,
    page_size_refusal,
)
from calcgraph.rest_compat.wire_events import EventPageOut


class EventsQuery(Query):
    type: list[str] = Field(
        default=[], description="repeatable; an event type, or a prefix ending in `*`"
    )
    subject: str | None = Field(default=None, description="the id of what events are about")
    run: str | None = Field(
        default=None,
        description="a workflow run id: only that run's events and its jobs' (404 for a run "
        "the caller may not see)",
    )
    after: str | None = Field(
        default=None, description="next_cursor of an earlier call, or `now` (the current end)"
    )
    limit: Annotated[int, BlankIsAbsent, page_size_refusal(MAX_LIMIT)] = page_size(
        DEFAULT_LIMIT, MAX_LIMIT
    )
    wait: Annotated[
        float,
        BlankIsAbsent,
        Refusal(
            f"wait must be a number of seconds from 0 to {MAX_WAIT:g}",
            f"a number from 0 to {MAX_WAIT:g}",
        ),
    ] = Field(
        default=0.0,
        ge=0,
        le=MAX_WAIT,
        allow_inf_nan=False,
        description="when nothing matches yet, wait up to this many seconds for an event",
    )


rest = Operations(tag="events")


@rest("GET", "/events", {200: EventPageOut}, errors=(404,))
async def list_events(call: Call[None, EventsQuery]) -> dict[str, Any]:
    """Events the caller may see, oldest first

    In the order they were recorded, after `after`; `next_cursor` is never null. With
    `wait`, a call that finds nothing answers as soon as a matching event is recorded."""
    q = call.query
    query = parse_query(q.type, q.subject, q.after, q.limit, q.run)
    page = await call.services.events.pull(call.principal, query, q.wait)
    return {"items": [structured(item) for item in page.items], "next_cursor": page.next_cursor}
