"""What the execution use cases need from the workers' side, as protocols: the adapters
(`calcgraph/workers/notify.py`, `calcgraph/workers/result_cache.py`) satisfy them. Pure."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from calcgraph.domain.jobs.cache_key import ResultLookup

__all__ = ["Notifications", "ResultLookup"]


class Notifications(Protocol):
    """Job completion notifications, as a waiter sees them: workers publish a job's id after
    the commit that recorded its result."""

    def listen(self, job_id: str) -> AbstractAsyncContextManager[asyncio.Event]:
        """An event set when `job_id` finishes (or finished lately)."""
        ...

    def steady(self) -> bool:
        """Every notification since long before now reaches `listen`: a job submitted just now
        cannot finish unseen."""
        ...
