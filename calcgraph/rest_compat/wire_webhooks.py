"""Answers of the webhook routes (contract section 9)."""

from __future__ import annotations

from pydantic import Field

from calcgraph.rest_compat.wire import Out, Timestamp


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
