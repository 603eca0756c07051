"""GraphQL types of the event log (contract section 9): a CloudEvents 1.0 event and a page."""

from __future__ import annotations

from types import SimpleNamespace

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.events.envelope import structured
from calcgraph.domain.events.service import EventPage
from calcgraph.domain.events.views import EventView
from calcgraph.domain.read_models import from_attributes
from calcgraph.domain.webhooks.views import DeliveryView, WebhookView
from calcgraph.schema.pages import Page
from calcgraph.schema.viewed import FromView, view_fields


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
        # Each field is the structured-mode member of its name (an extension attribute, had
        # the event any, is not a field).
        return from_attributes(cls, SimpleNamespace(**structured(view)))


@strawberry.type(name="EventPage", description="Events in recorded order.")
class EventPageType:
    items: list[CloudEventType] = strawberry.field(description="The events of this page.")
    next_cursor: str = strawberry.field(
        description="Pass as `after` for the next call; never null."
    )

    @classmethod
    def from_page(cls, page: EventPage) -> EventPageType:
        return cls(
            items=[CloudEventType.from_view(item) for item in page.items],
            next_cursor=page.next_cursor,
        )


@strawberry.type(name="Webhook", description="A webhook (contract section 9); its secret never.")
@view_fields(
    {
        "id": "Identifier.",
        "url": "Where its events are POSTed.",
        "types": "Event types, or prefixes ending in `*`.",
        "description": "What it is for.",
        "enabled": "False: switched off (or after 50 failures).",
        "created_at": "Creation time.",
    },
    id=strawberry.ID,
)
class WebhookType(FromView[WebhookView]):
    pass


@strawberry.type(
    name="CreatedWebhook",
    description="A webhook just created, with its signing secret: shown in this answer only.",
)
class CreatedWebhookType:
    webhook: WebhookType = strawberry.field(description="The webhook.")
    secret: str = strawberry.field(
        description="`whsec_<base64>`: the key of its signatures, never shown again."
    )


@strawberry.type(description="A page of webhooks.")
class WebhookPage(Page[WebhookType], items="Webhooks of this page."): ...


@strawberry.type(name="WebhookDelivery", description="One attempt to deliver an event.")
@view_fields(
    {
        "id": "Identifier of the attempt.",
        "event_id": "The event's id (its `webhook-id` header).",
        "type": "The event's type.",
        "attempt": "1 for the first attempt.",
        "status_code": "The receiver's HTTP status, if any.",
        "error": "Why it did not deliver, if it did not.",
        "duration_ms": "How long the attempt took.",
        "attempted_at": "When it was attempted.",
        "state": "`delivered`, `retrying` or `failed`.",
        "next_attempt_at": "When it is tried again.",
    },
    id=strawberry.ID,
)
class WebhookDeliveryType(FromView[DeliveryView]):
    pass


@strawberry.type(description="A page of delivery attempts, newest first.")
class WebhookDeliveryPage(Page[WebhookDeliveryType], items="Attempts of this page."): ...
