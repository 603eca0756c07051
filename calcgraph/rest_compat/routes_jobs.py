"""Read routes of jobs: the caller's jobs whose package the caller can still see."""

from __future__ import annotations

from pydantic import Field

from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.listing.paging import Page
from calcgraph.domain.runs.control.service import run_control
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire import INSTANT_HELP, PageQuery
from calcgraph.rest_compat.wire import Page as PageOut
from calcgraph.rest_compat.wire_jobs import JobOut

rest = Operations(tag="jobs")


class JobsQuery(PageQuery):
    function: str | None = Field(
        default=None, description="a case-insensitive part of `package/function`"
    )
    status: list[str] = Field(
        default=[], description="repeatable; any of `queued`, `running`, `success`, `failed`"
    )
    created_after: str | None = Field(default=None, description=f"inclusive; {INSTANT_HELP}")
    created_before: str | None = Field(default=None, description=f"exclusive; {INSTANT_HELP}")


@rest("GET", "/jobs", {200: PageOut[JobOut]})
async def list_jobs(call: Call[None, JobsQuery]) -> Page[JobView]:
    """The caller's jobs"""
    query = call.query
    return await call.read(
        job_read_service.list_jobs,
        query.page(),
        function=query.function,
        status=query.status,
        created_after=query.created_after,
        created_before=query.created_before,
    )


@rest("GET", "/jobs/{job_id}", {200: JobOut})
async def get_job(call: Call[None, None]) -> JobView:
    """A job"""
    return await call.read(job_read_service.get_job, call.path("job_id"))


@rest("POST", "/jobs/{job_id}/cancel", {200: JobOut}, errors=(403, 409))
async def cancel_job(call: Call[None, None]) -> JobView:
    """Cancel a queued or running job of the caller's: it ends failed, kind cancelled"""
    return await call.write(run_control.cancel_job, call.path("job_id"))
