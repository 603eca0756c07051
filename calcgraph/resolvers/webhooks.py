"""Webhook fields (contract section 9): thin calls into the webhook use cases the REST routes
call; a destination is checked against the operator's allow list, as there."""

from __future__ import annotations

from typing import Unpack

import strawberry

from calcgraph.domain.events.destinations import AllowList
from calcgraph.domain.webhooks.service import webhook_service
from calcgraph.resolvers.arguments import Paging, arguments, page_request
from calcgraph.resolvers.unit import page_of, read, read_page, write
from calcgraph.schema.context import Info
from calcgraph.schema.events import (
    CreatedWebhookType,
    WebhookDeliveryPage,
    WebhookDeliveryType,
    WebhookPage,
    WebhookType,
)


def _allow(info: Info) -> AllowList:
    return AllowList.parse(info.context.settings.webhook_allowed_hosts)


@strawberry.type
class WebhookQuery:
    @strawberry.field(description="The caller's webhooks (admins: all), oldest first.")
    @arguments(Paging)
    async def webhooks(self, info: Info, **paging: Unpack[Paging]) -> WebhookPage:
        listing = webhook_service.list_webhooks
        return await read_page(info, listing, paging, WebhookPage, WebhookType.from_view)

    @strawberry.field(description="A webhook; NotFound when it is another user's.")
    async def webhook(self, info: Info, id: strawberry.ID) -> WebhookType:
        return WebhookType.from_view(await read(info, webhook_service.get, str(id)))

    @strawberry.field(description="A webhook's delivery attempts, newest first.")
    @arguments(Paging)
    async def webhook_deliveries(
        self, info: Info, id: strawberry.ID, **paging: Unpack[Paging]
    ) -> WebhookDeliveryPage:
        page = await read(info, webhook_service.deliveries, str(id), page_request(paging))
        return page_of(page, WebhookDeliveryPage, WebhookDeliveryType.from_view)


@strawberry.type
class WebhookMutation:
    @strawberry.mutation(
        description="Create a webhook (at most 20 per user); the answer holds its secret, "
        "shown only here. A destination on a private, loopback or link-local address is "
        "refused (ValidationError) unless the operator allows it."
    )
    async def create_webhook(
        self, info: Info, url: str, types: list[str], description: str = ""
    ) -> CreatedWebhookType:
        created = await write(info, webhook_service.create, url, types, description, _allow(info))
        return CreatedWebhookType(webhook=WebhookType.from_view(created), secret=created.secret)

    @strawberry.mutation(description="Change a webhook's url, types or enabled.")
    async def update_webhook(
        self,
        info: Info,
        id: strawberry.ID,
        url: str | None = None,
        types: list[str] | None = None,
        enabled: bool | None = None,
    ) -> WebhookType:
        view = await write(
            info,
            webhook_service.update,
            str(id),
            _allow(info),
            url=url,
            types=types,
            enabled=enabled,
        )
        return WebhookType.from_view(view)

    @strawberry.mutation(description="Delete a webhook and its delivery attempts.")
    async def delete_webhook(self, info: Info, id: strawberry.ID) -> bool:
        await write(info, webhook_service.delete, str(id))
        return True

    @strawberry.mutation(
        description="Send the webhook a `calcgraph.webhook.test` event; answers its event id."
    )
    async def test_webhook(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        return strawberry.ID(await write(info, webhook_service.test, str(id)))
