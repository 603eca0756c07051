"""Answers of the admin routes, each its domain view as it is (`as_viewed`)."""

from __future__ import annotations

from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.views import UsageView
from calcgraph.rest_compat.wire import Out, as_viewed


class UsageOut(Out):
    __annotations__ = as_viewed(UsageView)


class QuotasOut(Out):
    __annotations__ = as_viewed(Quotas)


class UsageReportOut(Out):
    items: list[UsageOut]
    limits: QuotasOut
