"""Building functions from submitted code (spec: POST /functions; contract 4) and their logs.
Each route parses, calls one service, serialises."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.builds.local import LocalBuilds
from calcgraph.domain.builds.service import BuildOutcome, FunctionSubmission, build_service
from calcgraph.domain.builds.submission import format_duration, format_size
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import BuildOut
from calcgraph.rest_compat.schemas import SubmitFunctionBody
from calcgraph.rest_compat.state import database_of
from calcgraph.settings import Settings


def build_json(outcome: BuildOutcome) -> dict[str, Any]:
    """The specification's build response, plus the identifiers a client needs next."""
    return {
        "function_id": outcome.function_id,
        "status": outcome.status,
        "docker_image": outcome.docker_image,
        "image_size": format_size(outcome.image_size_bytes or 0),
        "build_time": format_duration(outcome.build_seconds),
        "vulnerabilities": outcome.vulnerabilities,
        "build_id": outcome.build_id,
        "function_version_id": outcome.function_version_id,
        "version": outcome.version,
        "version_status": outcome.version_status,
        "package_version": outcome.package_version,
        "log": f"/functions/{outcome.function_id}/builds/{outcome.build_id}/log",
    }


async def submit_function(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, SubmitFunctionBody)
    settings: Settings = request.app.state.settings
    database = database_of(request)
    async with database.write_session() as session:
        outcome = await build_service.submit(
            session,
            principal,
            settings,
            LocalBuilds(settings),
            FunctionSubmission(
                name=body.name,
                code=body.code,
                requirements=tuple(body.requirements),
                handler=body.handler,
                inputs=body.inputs,
                outputs=body.outputs,
                visibility=body.visibility,
                organization=body.organization,
            ),
        )
    # Raised after the commit: a refused build keeps its record and its reason.
    if outcome.refusal is not None:
        raise outcome.refusal
    return JSONResponse(build_json(outcome), status_code=201)


async def build_log(request: Request) -> PlainTextResponse:
    principal = require_principal(request)
    settings: Settings = request.app.state.settings
    database = database_of(request)
    async with database.read_session() as session:
        text = await build_service.read_log(
            session,
            principal,
            LocalBuilds(settings),
            request.path_params["function_id"],
            request.path_params["build_id"],
        )
    return PlainTextResponse(text)


routes = [
    Route("/functions", submit_function, methods=["POST"]),
    Route("/functions/{function_id}/builds/{build_id}/log", build_log, methods=["GET"]),
]
operations = [
    Operation(
        "POST",
        "/functions",
        "Build a function from submitted code",
        {201: BuildOut},
        body=SubmitFunctionBody,
        errors=(400, 403, 404, 409),
        tag="functions",
    ),
    Operation(
        "GET",
        "/functions/{function_id}/builds/{build_id}/log",
        "A build's log",
        {200: "text/plain"},
        errors=(404,),
        tag="functions",
    ),
]
