"""The webhook use cases of both doors (contract section 9, Webhooks): create (the secret is
shown once), list, get, change, delete, send a test event, list delivery attempts. Another
user's webhook is NotFound; admins reach every one."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import FieldError, NotFound, ValidationError
from calcgraph.domain.events.catalog import WEBHOOK_TEST, TypeFilterError, parse_types
from calcgraph.domain.events.destinations import (
    AllowList,
    DestinationError,
    check_addresses,
    parse_url,
)
from calcgraph.domain.events.models import Webhook
from calcgraph.domain.events.resolve import resolve
from calcgraph.domain.events.service import record
from calcgraph.domain.listing.paging import Page, PageRequest, creation_key, make_page
from calcgraph.domain.webhooks.repository import WebhookRepository
from calcgraph.domain.webhooks.views import (
    DeliveryView,
    WebhookCreatedView,
    WebhookView,
    delivery_view,
    webhook_view,
)

MAX_PER_USER = 20
MAX_DESCRIPTION = 500


def _refuse(field: str, message: str) -> ValidationError:
    return ValidationError(message, [FieldError(("body", field), message)])


def _types(types: Sequence[str]) -> list[str]:
    if not types:
        raise _refuse("types", "name at least one event type (or `*` for every type)")
    try:
        parse_types(types)
    except TypeFilterError as exc:
        raise _refuse("types", str(exc)) from None
    return list(dict.fromkeys(types))


def _description(description: str) -> str:
    if len(description) > MAX_DESCRIPTION:
        raise _refuse("description", f"at most {MAX_DESCRIPTION} characters")
    if "\x00" in description:
        raise _refuse("description", "may not hold NUL")
    return description


async def checked_url(url: str, allow: AllowList) -> str:
    """The URL, if a webhook may be sent there: http(s), resolving to public addresses (or
    allowed ones); else ValidationError naming why."""
    try:
        destination = parse_url(url)
        check_addresses(destination.host, await resolve(destination.host, destination.port), allow)
    except DestinationError as exc:
        raise _refuse("url", str(exc)) from None
    return url


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


class WebhookService:
    async def create(
        self,
        session: AsyncSession,
        principal: Principal,
        url: str,
        types: Sequence[str],
        description: str,
        allow: AllowList,
    ) -> WebhookCreatedView:
        types = _types(types)
        description = _description(description)
        url = await checked_url(url, allow)
        repository = WebhookRepository.from_session(session)
        if await repository.count_of(principal.user_id) >= MAX_PER_USER:
            raise _refuse("url", f"at most {MAX_PER_USER} webhooks per user: delete one first")
        secret = new_secret()
        row = Webhook(
            id=new_id(),
            user_id=principal.user_id,
            url=url,
            types=types,
            description=description,
            secret=secret,
            enabled=True,
            failed_in_a_row=0,
            created_at=utcnow(),
        )
        await repository.add(row)
        view = webhook_view(row)
        return WebhookCreatedView(**{**view.__dict__, "secret": secret})

    async def _own(self, session: AsyncSession, principal: Principal, webhook_id: str) -> Webhook:
        found = await WebhookRepository.from_session(session).get(webhook_id)
        if found is None or (found.user_id != principal.user_id and not principal.is_admin):
            raise NotFound(f"no webhook {webhook_id!r}")
        return found

    async def get(
        self, session: AsyncSession, principal: Principal, webhook_id: str
    ) -> WebhookView:
        return webhook_view(await self._own(session, principal, webhook_id))

    async def list_webhooks(
        self, session: AsyncSession, principal: Principal, page: PageRequest
    ) -> Page[WebhookView]:
        owner = None if principal.is_admin else principal.user_id
        rows = await WebhookRepository.from_session(session).page(owner, page)
        return make_page([webhook_view(r) for r in rows], page.limit, creation_key)

    async def update(
        self,
        session: AsyncSession,
        principal: Principal,
        webhook_id: str,
        allow: AllowList,
        *,
        url: str | None = None,
        types: Sequence[str] | None = None,
        enabled: bool | None = None,
    ) -> WebhookView:
        webhook = await self._own(session, principal, webhook_id)
        if url is not None:
            webhook.url = await checked_url(url, allow)
        if types is not None:
            webhook.types = _types(types)
        if enabled is not None:
            webhook.enabled = enabled
            if enabled:
                webhook.failed_in_a_row = 0
        await session.flush()
        return webhook_view(webhook)

    async def delete(self, session: AsyncSession, principal: Principal, webhook_id: str) -> None:
        webhook = await self._own(session, principal, webhook_id)
        await WebhookRepository.from_session(session).remove(webhook)

    async def test(self, session: AsyncSession, principal: Principal, webhook_id: str) -> str:
        """Record a `calcgraph.webhook.test` event, delivered to this webhook only."""
        webhook = await self._own(session, principal, webhook_id)
        return await record(
            session,
            WEBHOOK_TEST,
            webhook.id,
            {"webhook_id": webhook.id, "url": webhook.url, "requested_by": principal.username},
        )

    async def deliveries(
        self, session: AsyncSession, principal: Principal, webhook_id: str, page: PageRequest
    ) -> Page[DeliveryView]:
        webhook = await self._own(session, principal, webhook_id)
        rows = await WebhookRepository.from_session(session).deliveries(webhook.id, page)
        views = [delivery_view(r) for r in rows]
        return make_page(views, page.limit, lambda v: (v.created_at.isoformat(), v.id))


webhook_service = WebhookService()
