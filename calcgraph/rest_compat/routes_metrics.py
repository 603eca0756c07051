"""`GET /metrics`: Prometheus text format (public, contract section 3)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from calcgraph.domain.jobs.service import job_read_service
from calcgraph.rest_compat.operations import Call, Operations

rest = Operations(tag="meta")


@rest("GET", "/metrics", {200: CONTENT_TYPE_LATEST})
async def metrics(call: Call[None, None]) -> Response:
    """Prometheus metrics"""
    services = call.services
    found = services.metrics
    # Counted at scrape time: the jobs' transitions happen in whichever worker process ran them.
    async with call.database.read_session() as session:
        counts = await job_read_service.count_by_status(session)
    found.set_jobs(counts, await services.probes.queue_length())
    return Response(found.render(), media_type=CONTENT_TYPE_LATEST)
