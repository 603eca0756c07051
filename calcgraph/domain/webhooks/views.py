"""Webhooks and their delivery attempts as the doors answer them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from calcgraph.domain.events.models import Webhook, WebhookDelivery


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
    return WebhookView(
        id=row.id,
        url=row.url,
        types=list(row.types or []),
        description=row.description,
        enabled=row.enabled,
        created_at=row.created_at,
        user_id=row.user_id,
    )


def delivery_view(row: WebhookDelivery) -> DeliveryView:
    return DeliveryView(
        id=row.id,
        event_id=row.event_id,
        type=row.type,
        attempt=row.attempt,
        status_code=row.status_code,
        error=row.error,
        duration_ms=row.duration_ms,
        attempted_at=row.attempted_at,
        state=row.state,
        next_attempt_at=row.next_attempt_at,
        created_at=row.created_at,
    )
