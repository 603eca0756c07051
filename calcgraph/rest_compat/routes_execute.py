"""Execute routes: every addressing form of the specification, answered per contract 4.

The job is created (or answered from the result cache) in one unit of work; its message leaves
after the commit; the route then waits up to `wait` seconds for the result outside any
transaction: 200 with outputs or error when the job ended, else 202 with its id and status.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain import json_limits
from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.jobs.address import ExecuteAddress
from calcgraph.domain.jobs.execution.service import TERMINAL, job_execution_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.rest_compat.operations import ExecuteQuery, Operation
from calcgraph.rest_compat.responses import ExecuteOut
from calcgraph.rest_compat.schemas import ExecuteBody
from calcgraph.rest_compat.state import database_of
from calcgraph.workers.inprocess import Execution

DEFAULT_WAIT_SECONDS = 30.0


def parse_wait(raw: str | None, cap: float) -> float:
    if raw is None:
        return min(DEFAULT_WAIT_SECONDS, cap)
    try:
        wait = float(raw)
    except ValueError:
        wait = math.nan
    if not math.isfinite(wait) or wait < 0:
        raise ValidationError(
            "wait must be a number of seconds, 0 or more",
            [FieldError(("query", "wait"), "expected a number of seconds >= 0")],
        )
    return min(wait, cap)


async def _inputs(request: Request) -> object:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json_limits.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValidationError(
            "request body is not valid JSON", [FieldError(("body",), "invalid JSON")]
        ) from None
    if not isinstance(body, dict):
        raise ValidationError(
            'the body is an object {"inputs": {...}}', [FieldError(("body",), "expected an object")]
        )
    return body.get("inputs", {})


def execute_json(job: JobView) -> tuple[dict[str, Any], int]:
    if job.status == "success":
        return {"job_id": job.id, "status": job.status, "outputs": job.outputs}, 200
    if job.status == "failed":
        return {"job_id": job.id, "status": job.status, "error": job.error}, 200
    return {"job_id": job.id, "status": job.status}, 202


async def _execute(request: Request, address: ExecuteAddress) -> JSONResponse:
    principal = require_principal(request)
    database = database_of(request)
    execution: Execution = request.app.state.execution
    wait = parse_wait(request.query_params.get("wait"), execution.settings.execute_max_wait_seconds)
    inputs = await _inputs(request)
    async with database.write_session() as session:
        job = await job_execution_service.submit(
            session, principal, address, inputs, execution.cache
        )
    if job.status not in TERMINAL and wait > 0:

        async def read() -> JobView:
            async with database.read_session() as session:
                return await job_execution_service.view(session, job.id)

        job = await execution.wait(job.id, wait, read)
    body, status = execute_json(job)
    return JSONResponse(body, status_code=status)


async def execute_function(request: Request) -> JSONResponse:
    return await _execute(
        request, ExecuteAddress.by_function_id(request.path_params["function_id"])
    )


async def execute_package_function(request: Request) -> JSONResponse:
    address = ExecuteAddress.by_path(
        request.path_params["package"], request.path_params["function"]
    )
    return await _execute(request, address)


routes = [
    Route("/functions/{function_id}/execute", execute_function, methods=["POST"]),
    Route(
        "/packages/{package}/functions/{function}/execute",
        execute_package_function,
        methods=["POST"],
    ),
]


def _operation(path: str, summary: str) -> Operation:
    return Operation(
        "POST",
        path,
        summary,
        {200: ExecuteOut, 202: ExecuteOut},
        body=ExecuteBody,
        body_required=False,
        query=ExecuteQuery,
        # 400: a package path that is not package[@version]/functions/name[@version].
        errors=(400, 403, 404),
        tag="execute",
    )


operations = [
    _operation(
        "/functions/{function_id}/execute",
        "Run a function (or a pinned function version) by identifier",
    ),
    _operation(
        "/packages/{package}/functions/{function}/execute",
        "Run a function by package and function name, each with an optional @version",
    ),
]
