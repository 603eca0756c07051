"""Building functions from submitted code (spec: POST /functions; contract 4) and their logs.
Each route parses, calls one service, serialises."""

from __future__ import annotations

from starlette.responses import PlainTextResponse

from calcgraph.domain.builds.service import BuildOutcome, FunctionSubmission, build_service
from calcgraph.domain.read_models import from_attributes
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire_builds import BuildOut, SubmitFunctionBody

rest = Operations(tag="functions")


@rest("POST", "/functions", {201: BuildOut}, errors=(400, 403, 404, 409))
async def submit_function(call: Call[SubmitFunctionBody, None]) -> BuildOutcome:
    """Build a function from submitted code"""
    body = call.body
    outcome = await call.write(
        build_service.submit,
        call.services.settings.submission_limits,
        call.services.builds,
        from_attributes(FunctionSubmission, body, requirements=tuple(body.requirements)),
    )
    # Raised after the commit: a refused build keeps its record and its reason.
    if outcome.refusal is not None:
        raise outcome.refusal
    return outcome


@rest("GET", "/functions/{function_id}/builds/{build_id}/log", {200: "text/plain"})
async def build_log(call: Call[None, None]) -> PlainTextResponse:
    """A build's log"""
    text = await call.read(
        build_service.read_log,
        call.services.builds,
        call.path("function_id"),
        call.path("build_id"),
    )
    return PlainTextResponse(text)
