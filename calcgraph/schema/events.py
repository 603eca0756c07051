"""GraphQL types of the event log (contract section 9): a CloudEvents 1.0 event and a page."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.events.envelope import structured
from calcgraph.domain.events.views import EventView


@strawberry.type(name="CloudEvent", description="An event, as CloudEvents 1.0 structures it.")
class CloudEventType:
    specversion: str = strawberry.field(description='"1.0"')
    id: strawberry.ID = strawberry.field(description="Unique; the same on every delivery.")
    source: str = strawberry.field(description='"calcgraph"')
    type: str = strawberry.field(description="e.g. calcgraph.job.failed")
    subject: str = strawberry.field(description="The id of what the event is about.")
    time: str = strawberry.field(description="RFC 3339, UTC.")
    datacontenttype: str = strawberry.field(description='"application/json"')
    data: JSON = strawberry.field(description="What the event says (section 9's table).")

    @classmethod
    def from_view(cls, view: EventView) -> CloudEventType:
        envelope: dict[str, Any] = structured(view)
        return cls(
            specversion=envelope["specversion"],
            id=strawberry.ID(envelope["id"]),
            source=envelope["source"],
            type=envelope["type"],
            subject=envelope["subject"],
            time=envelope["time"],
            datacontenttype=envelope["datacontenttype"],
            data=envelope["data"],
        )


@strawberry.type(name="EventPage", description="Events in recorded order.")
class EventPageType:
    items: list[CloudEventType] = strawberry.field(description="The events of this page.")
    next_cursor: str = strawberry.field(
        description="Pass as `after` for the next call; never null."
    )
