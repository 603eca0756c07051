"""Webhook routes (contract section 9, Webhooks). Each route parses, calls one webhook use
case, serialises; a destination is checked against the operator's allow list."""

from __future__ import annotations

from typing import Any

from calcgraph.domain.events.destinations import AllowList
from calcgraph.domain.listing.paging import Page
from calcgraph.domain.webhooks.service import webhook_service
from calcgraph.domain.webhooks.views import DeliveryView, WebhookCreatedView, WebhookView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire import PageQuery
from calcgraph.rest_compat.wire_webhooks import (
    CreateWebhookBody,
    DeliveryPageOut,
    UpdateWebhookBody,
    WebhookCreatedOut,
    WebhookOut,
    WebhookPageOut,
    WebhookTestOut,
)

rest = Operations(tag="webhooks")


def _allow(call: Call[Any, Any]) -> AllowList:
    return AllowList.parse(call.services.settings.webhook_allowed_hosts)


@rest("POST", "/webhooks", {201: WebhookCreatedOut})
async def create_webhook(call: Call[CreateWebhookBody, None]) -> WebhookCreatedView:
    """Create a webhook; its secret is shown only here"""
    body = call.body
    return await call.write(
        webhook_service.create, body.url, body.types, body.description, _allow(call)
    )


@rest("GET", "/webhooks", {200: WebhookPageOut})
async def list_webhooks(call: Call[None, PageQuery]) -> Page[WebhookView]:
    """The caller's webhooks (admins: all)"""
    return await call.read(webhook_service.list_webhooks, call.query.page())


@rest("GET", "/webhooks/{webhook_id}", {200: WebhookOut})
async def get_webhook(call: Call[None, None]) -> WebhookView:
    """A webhook"""
    return await call.read(webhook_service.get, call.path("webhook_id"))


@rest("PATCH", "/webhooks/{webhook_id}", {200: WebhookOut})
async def update_webhook(call: Call[UpdateWebhookBody, None]) -> WebhookView:
    """Change a webhook's url, types or enabled"""
    body = call.body
    return await call.write(
        webhook_service.update,
        call.path("webhook_id"),
        _allow(call),
        url=body.url,
        types=body.types,
        enabled=body.enabled,
    )


@rest("DELETE", "/webhooks/{webhook_id}", {204: None})
async def delete_webhook(call: Call[None, None]) -> None:
    """Delete a webhook"""
    await call.write(webhook_service.delete, call.path("webhook_id"))


@rest("POST", "/webhooks/{webhook_id}/test", {202: WebhookTestOut})
async def test_webhook(call: Call[None, None]) -> dict[str, str]:
    """Send it a calcgraph.webhook.test event"""
    event_id = await call.write(webhook_service.test, call.path("webhook_id"))
    return {"event_id": event_id}


@rest("GET", "/webhooks/{webhook_id}/deliveries", {200: DeliveryPageOut})
async def list_deliveries(call: Call[None, PageQuery]) -> Page[DeliveryView]:
    """Delivery attempts, newest first"""
    return await call.read(webhook_service.deliveries, call.path("webhook_id"), call.query.page())
