"""Quotas per user (contract 8b): asked before a run or a job is created, and by admins to see
who uses what."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import PermissionDenied
from calcgraph.domain.quotas.limits import Quotas, check_jobs, check_runs
from calcgraph.domain.quotas.repository import QuotaRepository
from calcgraph.domain.quotas.views import UsageView

STORED_FRESH_SECONDS = 30.0
"""A user's stored bytes are summed over all their jobs: at most once per this per process."""


class QuotaService:
    def __init__(self) -> None:
        # user id -> (bytes, monotonic time read); bounded by the users who execute.
        self._stored: dict[str, tuple[int, float]] = {}

    async def require_run_room(
        self, session: AsyncSession, principal: Principal, quotas: Quotas
    ) -> None:
        unfinished = await QuotaRepository.from_session(session).unfinished_runs(principal.user_id)
        check_runs(unfinished, quotas)

    async def require_job_room(
        self, session: AsyncSession, principal: Principal, quotas: Quotas
    ) -> None:
        repository = QuotaRepository.from_session(session)
        stored = await self.stored_bytes(session, principal.user_id)
        check_jobs(await repository.queued_jobs(principal.user_id), stored, quotas)

    async def job_room(
        self, session: AsyncSession, user_id: str, quotas: Quotas, queued: int | None = None
    ) -> int:
        """How many more jobs the user may have queued now (0 or more); `queued`: their
        queued jobs, counted already (a tick counts them with the owner's rights)."""
        if queued is None:
            queued = await QuotaRepository.from_session(session).queued_jobs(user_id)
        return max(quotas.queued_jobs - queued, 0)

    async def stored_bytes(self, session: AsyncSession, user_id: str) -> int:
        """What the user's jobs store, read at most every STORED_FRESH_SECONDS."""
        now = time.monotonic()
        known = self._stored.get(user_id)
        if known is not None and now - known[1] < STORED_FRESH_SECONDS:
            return known[0]
        stored = await QuotaRepository.from_session(session).stored(user_id)
        if len(self._stored) > 100_000:
            self._stored.clear()
        self._stored[user_id] = (stored, now)
        return stored

    def cached(self, user_id: str) -> int | None:
        """The user's stored bytes when read less than STORED_FRESH_SECONDS ago, else None."""
        known = self._stored.get(user_id)
        if known is not None and time.monotonic() - known[1] < STORED_FRESH_SECONDS:
            return known[0]
        return None

    def forget(self, user_id: str) -> None:
        """The user's stored bytes changed a lot (a big result): read them afresh next time."""
        self._stored.pop(user_id, None)

    async def usage(self, session: AsyncSession, principal: Principal) -> list[UsageView]:
        """What every user holds now; admins only."""
        if not principal.is_admin:
            raise PermissionDenied("usage: only admins see what every user holds")
        return await QuotaRepository.from_session(session).usage()


quota_service = QuotaService()
