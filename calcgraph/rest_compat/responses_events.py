"""Response bodies of the event and webhook routes (contract section 9)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from calcgraph.rest_compat.responses import Out, Timestamp


class EventOut(Out):
    """A CloudEvents 1.0 event in structured mode."""

    specversion: str = Field(description='"1.0"')
    id: str = Field(description="unique; the same on every delivery of the event")
    source: str = Field(description='"calcgraph"')
    type: str = Field(description="e.g. calcgraph.job.failed")
    subject: str = Field(description="the id of what the event is about")
    time: str = Field(description="RFC 3339, UTC", json_schema_extra={"format": "date-time"})
    datacontenttype: str = Field(description='"application/json"')
    data: dict[str, Any]


class EventPageOut(Out):
    items: list[EventOut]
    next_cursor: str = Field(description="pass as `after` for the next call; never null")


class WebhookOut(Out):
    id: str
    url: str
    types: list[str]
    description: str
    enabled: bool
    created_at: Timestamp


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="whsec_<base64>: shown only in this answer")


class WebhookPageOut(Out):
    items: list[WebhookOut]
    next_cursor: str | None = None


class DeliveryOut(Out):
    event_id: str
    type: str
    attempt: int
    status_code: int | None
    error: str | None
    duration_ms: int | None
    attempted_at: Timestamp | None
    state: str = Field(description="delivered, retrying, failed (pending: not tried yet)")
    next_attempt_at: Timestamp | None


class DeliveryPageOut(Out):
    items: list[DeliveryOut]
    next_cursor: str | None = None


class WebhookTestOut(Out):
    event_id: str
