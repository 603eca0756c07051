"""All SQL of webhooks and of their deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Table,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from calcgraph.db.base import RepositoryBase
from calcgraph.domain.access.models import User
from calcgraph.domain.events.models import Event, Webhook, WebhookDelivery
from calcgraph.domain.listing.paging import PageRequest
from calcgraph.domain.listing.repository import keyset_clause

_DELIVERIES = cast(Table, WebhookDelivery.__table__)


def _count(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


class WebhookRepository(RepositoryBase[Webhook]):
    model = Webhook

    async def count_of(self, user_id: str) -> int:
        found = await self.session.scalar(
            select(func.count()).select_from(Webhook).where(Webhook.user_id == user_id)
        )
        return int(found or 0)

    async def page(self, user_id: str | None, page: PageRequest) -> list[Webhook]:
        """Oldest first; `user_id` None: every user's (admins)."""
        query = select(Webhook)
        if user_id is not None:
            query = query.where(Webhook.user_id == user_id)
        query = query.where(keyset_clause(Webhook.created_at, Webhook.id, page.after))
        rows = await self.session.scalars(
            query.order_by(Webhook.created_at, Webhook.id).limit(page.limit + 1)
        )
        return list(rows)

    async def remove(self, webhook: Webhook) -> None:
        await self.session.execute(delete(Webhook).where(Webhook.id == webhook.id))

    async def deliveries(self, webhook_id: str, page: PageRequest) -> list[WebhookDelivery]:
        """The attempts made, newest first (not the next ones, written ahead, `pending`)."""
        query = select(WebhookDelivery).where(
            WebhookDelivery.webhook_id == webhook_id,
            WebhookDelivery.state != "pending",
            keyset_clause(
                WebhookDelivery.created_at, WebhookDelivery.id, page.after, newest_first=True
            ),
        )
        rows = await self.session.scalars(
            query.order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc()).limit(
                page.limit + 1
            )
        )
        return list(rows)

    # --- the dispatcher's side ---

    async def enabled_with_owners(self) -> list[tuple[Webhook, list[Any]]]:
        """Every enabled webhook, with its owner's roles (admins see every event)."""
        rows = await self.session.execute(
            select(Webhook, User.roles)
            .join(User, User.id == Webhook.user_id)
            .where(Webhook.enabled.is_(True))
        )
        return [(row[0], list(row[1] or [])) for row in rows]

    async def any_enabled(self) -> bool:
        found = await self.session.scalar(
            select(Webhook.id).where(Webhook.enabled.is_(True)).limit(1)
        )
        return found is not None

    async def add_deliveries(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(insert(_DELIVERIES), list(rows))

    @staticmethod
    def _due_clause(now: datetime, exclude: Sequence[str]) -> list[ColumnElement[bool]]:
        clauses = [
            WebhookDelivery.state == "pending",
            WebhookDelivery.next_attempt_at <= now,
            or_(WebhookDelivery.lease_until.is_(None), WebhookDelivery.lease_until < now),
        ]
        if exclude:
            clauses.append(WebhookDelivery.webhook_id.not_in(sorted(exclude)))
        return clauses

    async def due(
        self, now: datetime, limit: int, exclude: Sequence[str] = (), webhook: str | None = None
    ) -> list[tuple[str, str]]:
        """(delivery id, webhook id) of attempts due now that no worker holds (or whose
        holder's lease ran out), oldest due first, of webhooks not in `exclude` (of `webhook`
        only, when given)."""
        query = select(WebhookDelivery.id, WebhookDelivery.webhook_id).where(
            *self._due_clause(now, exclude)
        )
        if webhook is not None:
            query = query.where(WebhookDelivery.webhook_id == webhook)
        rows = await self.session.execute(
            query.order_by(WebhookDelivery.next_attempt_at).limit(limit)
        )
        return [(row[0], row[1]) for row in rows]

    async def waiting(self, now: datetime, webhook_ids: Sequence[str]) -> set[str]:
        """Those of these webhooks that have attempts due now that no worker holds: a new
        attempt to one of them goes behind those, not ahead of them."""
        if not webhook_ids:
            return set()
        rows = await self.session.scalars(
            select(WebhookDelivery.webhook_id)
            .where(
                *self._due_clause(now, ()),
                WebhookDelivery.webhook_id.in_(sorted(set(webhook_ids))),
            )
            .distinct()
        )
        return set(rows)

    async def any_due(self, now: datetime, exclude: Sequence[str] = ()) -> bool:
        found = await self.session.scalar(
            select(WebhookDelivery.id).where(*self._due_clause(now, exclude)).limit(1)
        )
        return found is not None

    async def lease(self, delivery_id: str, now: datetime, until: datetime) -> bool:
        result = await self.session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.state == "pending",
                or_(WebhookDelivery.lease_until.is_(None), WebhookDelivery.lease_until < now),
            )
            .values(lease_until=until)
            .execution_options(synchronize_session=False)
        )
        return _count(result) == 1

    async def attempt(self, delivery_id: str) -> tuple[WebhookDelivery, Webhook, Event] | None:
        row = (
            await self.session.execute(
                select(WebhookDelivery, Webhook, Event)
                .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
                .join(Event, Event.id == WebhookDelivery.event_id)
                .where(WebhookDelivery.id == delivery_id)
            )
        ).first()
        return None if row is None else (row[0], row[1], row[2])

    async def attempts(
        self, delivery_ids: Sequence[str]
    ) -> list[tuple[WebhookDelivery, Webhook, Event]]:
        """`attempt` for several deliveries, in one statement."""
        if not delivery_ids:
            return []
        rows = await self.session.execute(
            select(WebhookDelivery, Webhook, Event)
            .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
            .join(Event, Event.id == WebhookDelivery.event_id)
            .where(WebhookDelivery.id.in_(sorted(set(delivery_ids))))
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def record(self, delivery_id: str, values: dict[str, Any]) -> bool:
        """The outcome of a pending attempt, once (a second worker's finds 0 rows)."""
        result = await self.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id, WebhookDelivery.state == "pending")
            .values(**values, lease_until=None)
            .execution_options(synchronize_session=False)
        )
        return _count(result) == 1

    async def count_failure(self, webhook_id: str, failed: bool) -> int:
        """Events ended failed in a row, after this outcome (0 after a delivered one). A
        delivered one writes the webhook's row only when failures were counted: the attempts
        in flight to one webhook, each ending in its own unit, would otherwise queue on that
        row's lock, one commit after another."""
        if not failed:
            await self.session.execute(
                update(Webhook)
                .where(Webhook.id == webhook_id, Webhook.failed_in_a_row != 0)
                .values(failed_in_a_row=0)
                .execution_options(synchronize_session=False)
            )
            return 0
        await self.session.execute(
            update(Webhook)
            .where(Webhook.id == webhook_id)
            .values(failed_in_a_row=Webhook.failed_in_a_row + 1)
            .execution_options(synchronize_session=False)
        )
        found = await self.session.scalar(
            select(Webhook.failed_in_a_row).where(Webhook.id == webhook_id)
        )
        return int(found or 0)

    async def disable(self, webhook_id: str) -> bool:
        result = await self.session.execute(
            update(Webhook)
            .where(Webhook.id == webhook_id, Webhook.enabled.is_(True))
            .values(enabled=False)
            .execution_options(synchronize_session=False)
        )
        return _count(result) == 1
