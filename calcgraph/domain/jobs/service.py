"""Reading jobs under the access policy. (Submitting and running jobs belong to other issues.)"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.paging import Page, PageRequest, make_page
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import NotFound
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.packages.repository import PackageRepository


class JobReadService:
    async def list_jobs(
        self, session: AsyncSession, principal: Principal, page: PageRequest
    ) -> Page[JobView]:
        rows = await JobRepository.from_session(session).list_of_caller(
            principal, page.limit, page.after
        )
        return make_page(rows, page.limit, JobView.sort_key)

    async def get_job(self, session: AsyncSession, principal: Principal, job_id: str) -> JobView:
        job = await JobRepository.from_session(session).get_view(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        package = await PackageRepository.from_session(session).get_view(job.package_id)
        await access_service.require(
            session, principal, ("see_job", f"job {job_id!r}"), on=package, submitted_by=job.user_id
        )
        return job

    async def visible_jobs(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, JobView]:
        """The jobs among `ids` that `get_job` would answer, by id; the others are absent
        (GraphQL relations to a job: a run's node states)."""
        rows = await JobRepository.from_session(session).visible_views(principal, ids)
        return {job.id: job for job in rows}

    async def count_by_status(self, session: AsyncSession) -> dict[str, int]:
        """Totals for the public /metrics (contract section 3): counts, never rows."""
        return await JobRepository.from_session(session).count_by_status()


job_read_service = JobReadService()
