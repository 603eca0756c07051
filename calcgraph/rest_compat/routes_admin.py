"""REST routes for admins: what every user holds against the quotas (contract 8b)."""

from __future__ import annotations

from dataclasses import dataclass

from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.quotas.views import UsageView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire_admin import UsageReportOut

rest = Operations(tag="admin")


@dataclass(frozen=True)
class UsageReport:
    items: list[UsageView]
    limits: Quotas


@rest("GET", "/admin/usage", {200: UsageReportOut}, errors=(403,))
async def usage(call: Call[None, None]) -> UsageReport:
    """What every user holds now, most stored bytes first, beside the per-user limits; admins
    only"""
    items = await call.read(quota_service.usage)
    return UsageReport(items=items, limits=call.services.settings.quotas)
