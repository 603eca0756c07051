"""Liveness and readiness."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.ops.health import readiness
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import Health
from calcgraph.rest_compat.state import database_of
from calcgraph.workers.inprocess import Execution


async def health(request: Request) -> JSONResponse:
    execution: Execution = request.app.state.execution
    status, body = await readiness(database_of(request), execution.redis_reachable)
    return JSONResponse(body, status_code=status)


routes = [Route("/health", health, methods=["GET"])]
operations = [
    Operation("GET", "/health", "Liveness and readiness", {200: Health, 503: Health}, tag="meta")
]
