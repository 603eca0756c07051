"""Execute routes: every addressing form of the specification, answered per contract 4.

The execution service (`calcgraph.domain.execution`) creates the job (or answers it from the
result cache) in one unit of work, then waits up to `wait` seconds for the result outside any
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
from calcgraph.domain.jobs.views import JobView
from calcgraph.rest_compat.operations import ExecuteQuery, Operation
from calcgraph.rest_compat.responses import ExecuteOut
from calcgraph.rest_compat.schemas import ExecuteBody
from calcgraph.rest_compat.state import services_of

WAIT = ("query", "wait")


def seconds_param(raw: str | None) -> float | None:
    """A query parameter's number of seconds as written (NaN when it is not a number: the
    execution service refuses it, with its bounds); None when absent."""
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return math.nan


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
    wait = seconds_param(request.query_params.get("wait"))
    inputs = await _inputs(request)
    execution = services_of(request).execution
    job = await execution.execute(principal, address, inputs, wait, where=WAIT)
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
