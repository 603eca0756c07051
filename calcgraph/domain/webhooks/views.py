"""Webhooks and their delivery attempts as the doors answer them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from calcgraph.domain.events.models import Webhook, WebhookDelivery
from calcgraph.domain.read_models import from_attributes


@dataclass(frozen=True)
class WebhookView:
    id: str
    url: str
    types: list[str]
    description: str
    enabled: bool
    created_at: datetime
    user_id: str


@dataclass(frozen=True)
class WebhookCreatedView(WebhookView):
    secret: str = ""
    """Shown in the creation answer only."""


@dataclass(frozen=True)
class DeliveryView:
    id: str
    event_id: str
    type: str
    attempt: int
    status_code: int | None
    error: str | None
    duration_ms: int | None
    attempted_at: datetime | None
    state: str
    next_attempt_at: datetime | None
    created_at: datetime


def webhook_view(row: Webhook) -> WebhookView:
    return from_attributes(WebhookView, row, types=list(row.types or []))


def delivery_view(row: WebhookDelivery) -> DeliveryView:
    return from_attributes(DeliveryView, row)
