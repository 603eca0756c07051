"""Reading jobs under the access policy. (Submitting and running jobs belong to other issues.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import found
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.jobs.views import JOB_STATUSES, JobView
from calcgraph.domain.listing.filters import JobFilter, TimeRange, parse_search, parse_statuses
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.packages.repository import PackageRepository


class JobReadService:
    async def list_jobs(
        self,
        session: AsyncSession,
        principal: Principal,
        page: PageRequest,
        *,
        function: str | None = None,
        status: Sequence[str] | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
    ) -> Page[JobView]:
        """The caller's jobs, narrowed by a `package/function` search, statuses and a creation
        time range (`domain.listing.filters`)."""
        where = JobFilter(
            parse_search(function, "function"),
            parse_statuses(status, JOB_STATUSES),
            TimeRange.parse(created_after, created_before, "created"),
        )
        return await JobRepository.from_session(session).list_of_caller(principal, page, where)

    async def get_job(self, session: AsyncSession, principal: Principal, job_id: str) -> JobView:
        job = found(await JobRepository.from_session(session).get_view(job_id), f"job {job_id!r}")
        package = await PackageRepository.from_session(session).get_view(job.package_id)
        await access_service.require(
            session, principal, ("see_job", f"job {job_id!r}"), on=package, submitted_by=job.user_id
        )
        return job

    async def visible_fields(
        self,
        session: AsyncSession,
        principal: Principal,
        fields: Sequence[str],
        *,
        ids: Sequence[str] = (),
        run_ids: Sequence[str] = (),
    ) -> dict[str, dict[str, Any]]:
        """`fields` (of `JOB_FIELDS`, `id` among them) of the jobs among `ids` and of every job
        of the runs `run_ids` that `get_job` would answer, by id; the others are absent. A
        projection for GraphQL relations (a run's node states), which read only the fields a
        query selects: a whole run's jobs without their inputs and outputs when not asked."""
        repository = JobRepository.from_session(session)
        rows = await repository.visible_fields_by_id(principal, ids, fields)
        rows += await repository.visible_fields_of_runs(principal, run_ids, fields)
        return {row["id"]: row for row in rows}

    async def count_by_status(self, session: AsyncSession) -> dict[str, int]:
        """Totals for the public /metrics (contract section 3): counts, never rows."""
        return await JobRepository.from_session(session).count_by_status()


job_read_service = JobReadService()
