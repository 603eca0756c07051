"""What the event and webhook methods send (contract section 9), free of I/O, as
`calcgraph.client.operations` does for the rest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from calcgraph.client import models as m
from calcgraph.client.operations import Call, Pages, _get, _listing, _model, _segment

MAX_WAIT = 30.0


def events(
    types: Sequence[str] = (),
    subject: str | None = None,
    after: str | None = None,
    limit: int | None = None,
    wait: float = 0.0,
    run: str | None = None,
) -> Call[m.EventPage]:
    """One page of `GET /events`; with `wait`, a long-poll; with `run` (a workflow run id),
    only that run's events and its jobs'."""
    params = [("type", t) for t in types]
    if subject is not None:
        params.append(("subject", subject))
    if run is not None:
        params.append(("run", run))
    if after is not None:
        params.append(("after", after))
    if limit is not None:
        params.append(("limit", str(limit)))
    held = min(max(wait, 0.0), MAX_WAIT)
    if held:
        params.append(("wait", str(held)))
    return Call("GET", "/events", _model(m.EventPage), params=params, holds=held)


def follow_events(
    types: Sequence[str] = (),
    subject: str | None = None,
    after: str | None = "now",
    wait: float = 25.0,
    run: str | None = None,
) -> Pages:
    """Every event the caller may see, as it is recorded, from `after` (default: now; None:
    the oldest kept): `for event in cg.events(["calcgraph.run.*"]): ...`. Long-polls.
    `run` (a workflow run id) keeps that run's own events and its jobs'."""
    cursor = after
    while True:
        page: m.EventPage = yield events(types, subject, cursor, None, wait, run)
        cursor = page.next_cursor


def create_webhook(url: str, types: Sequence[str], description: str = "") -> Call[m.Webhook]:
    """The new webhook with its signing secret (in this answer only: None elsewhere)."""
    body = {"url": url, "types": list(types), "description": description}
    return Call("POST", "/webhooks", _model(m.Webhook), json=body)


def list_webhooks(limit: int | None = None, cursor: str | None = None) -> Call[m.Page[m.Webhook]]:
    return _listing("/webhooks", m.Webhook, limit, cursor)


def get_webhook(webhook_id: str) -> Call[m.Webhook]:
    return _get(m.Webhook, "/webhooks/{}", webhook_id)


def update_webhook(
    webhook_id: str,
    url: str | None = None,
    types: Sequence[str] | None = None,
    enabled: bool | None = None,
) -> Call[m.Webhook]:
    body: dict[str, Any] = {}
    if url is not None:
        body["url"] = url
    if types is not None:
        body["types"] = list(types)
    if enabled is not None:
        body["enabled"] = enabled
    return Call("PATCH", f"/webhooks/{_segment(webhook_id)}", _model(m.Webhook), json=body)


def delete_webhook(webhook_id: str) -> Call[None]:
    return Call("DELETE", f"/webhooks/{_segment(webhook_id)}", lambda _: None)


def test_webhook(webhook_id: str) -> Call[str]:
    """Send it a `calcgraph.webhook.test` event; the event's id."""
    return Call(
        "POST", f"/webhooks/{_segment(webhook_id)}/test", lambda body: str(body["event_id"])
    )


def webhook_deliveries(
    webhook_id: str, limit: int | None = None, cursor: str | None = None
) -> Call[m.Page[m.Delivery]]:
    return _listing(f"/webhooks/{_segment(webhook_id)}/deliveries", m.Delivery, limit, cursor)
