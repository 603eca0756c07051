"""Read routes of jobs: the caller's jobs whose package the caller can still see."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.rest_compat.operations import Operation, PageQuery
from calcgraph.rest_compat.responses import JobOut, Page
from calcgraph.rest_compat.routes_packages import page_request
from calcgraph.rest_compat.state import database_of


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def job_json(job: JobView) -> dict[str, Any]:
    return {
        "id": job.id,
        "function_id": job.function_id,
        "function_version_id": job.function_version_id,
        "package_id": job.package_id,
        "status": job.status,
        "inputs": job.inputs,
        "outputs": job.outputs,
        "error": job.error,
        "logs": job.logs,
        "cache_hit": job.cache_hit,
        "workflow_run_id": job.workflow_run_id,
        "node_key": job.node_key,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
    }


async def list_jobs(request: Request) -> JSONResponse:
    principal = require_principal(request)
    page = page_request(request)
    async with database_of(request).read_session() as session:
        result = await job_read_service.list_jobs(session, principal, page)
    return JSONResponse(
        {"items": [job_json(j) for j in result.items], "next_cursor": result.next_cursor}
    )


async def get_job(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        job = await job_read_service.get_job(session, principal, request.path_params["job_id"])
    return JSONResponse(job_json(job))


routes = [
    Route("/jobs", list_jobs, methods=["GET"]),
    Route("/jobs/{job_id}", get_job, methods=["GET"]),
]
operations = [
    Operation(
        "GET", "/jobs", "The caller's jobs", {200: Page[JobOut]}, query=PageQuery, tag="jobs"
    ),
    Operation("GET", "/jobs/{job_id}", "A job", {200: JobOut}, errors=(404,), tag="jobs"),
]
