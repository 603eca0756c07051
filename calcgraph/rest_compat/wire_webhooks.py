"""Bodies and answers of the webhook routes (contract section 9): a webhook and a delivery
write their domain views (`as_viewed`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from calcgraph.domain.events.destinations import MAX_URL_LENGTH
from calcgraph.domain.webhooks.service import MAX_DESCRIPTION
from calcgraph.domain.webhooks.views import DeliveryView, WebhookView
from calcgraph.rest_compat.wire import Body, Out, as_viewed


class CreateWebhookBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/calcgraph",
                    "types": ["calcgraph.run.*", "calcgraph.job.failed"],
                    "description": "run notifications",
                }
            ]
        }
    )

    url: str = Field(max_length=MAX_URL_LENGTH, description="http or https")
    types: list[str] = Field(
        min_length=1, max_length=20, description="event types, or prefixes ending in `*`"
    )
    description: str = Field(default="", max_length=MAX_DESCRIPTION)


class UpdateWebhookBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"types": ["calcgraph.run.failed"], "enabled": True}]}
    )

    url: str | None = Field(default=None, max_length=MAX_URL_LENGTH)
    types: list[str] | None = Field(default=None, min_length=1, max_length=20)
    enabled: bool | None = None


class WebhookOut(Out):
    __annotations__ = as_viewed(WebhookView, exclude=("user_id",))


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="whsec_<base64>: shown only in this answer")


class WebhookPageOut(Out):
    items: list[WebhookOut]
    next_cursor: str | None = None


class DeliveryOut(Out):
    __annotations__ = as_viewed(
        DeliveryView,
        exclude=("id", "created_at"),
        state=Annotated[
            str, Field(description="delivered, retrying, failed (pending: not tried yet)")
        ],
    )


class DeliveryPageOut(Out):
    items: list[DeliveryOut]
    next_cursor: str | None = None


class WebhookTestOut(Out):
    event_id: str
