"""For webhook receivers: check that a delivery came from calcgraph (Standard Webhooks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from calcgraph.client.errors import CalcgraphError


class InvalidSignature(CalcgraphError):
    """The delivery's signature, id or timestamp does not check out: reject it."""


def verify_webhook(secret: str, headers: Mapping[str, str], body: bytes | str) -> dict[str, Any]:
    """The event a delivery carries, once its `webhook-signature` is checked against `secret`
    (the `whsec_...` shown when the webhook was created) and its `webhook-timestamp` is
    within five minutes; else `InvalidSignature`. Deduplicate by `event["id"]`."""
    try:
        event = Webhook(secret).verify(body, dict(headers))
    except WebhookVerificationError as exc:
        raise InvalidSignature(f"InvalidSignature: {exc}") from None
    if not isinstance(event, dict):
        raise InvalidSignature("InvalidSignature: the body is not an event object")
    return event
