"""Execute routes: every addressing form of the specification, answered per contract 4.

The job is created (or answered from the result cache) in one unit of work; its message leaves
after the commit; the route then waits up to `wait` seconds for the result outside any
transaction: 200 with outputs or error when the job ended, else 202 with its id and status.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from calcgraph.domain.jobs.address import ExecuteAddress
from calcgraph.domain.jobs.execution.service import TERMINAL, job_execution_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.rest_compat.operations import Call, Operations, Reply
from calcgraph.rest_compat.parsing import Query, Refusal
from calcgraph.rest_compat.responses import ExecuteOut
from calcgraph.rest_compat.schemas import ExecuteBody
from calcgraph.workers.inprocess import Execution

DEFAULT_WAIT_SECONDS = 30.0


class ExecuteQuery(Query):
    wait: Annotated[
        float,
        Refusal("wait must be a number of seconds, 0 or more", "expected a number of seconds >= 0"),
    ] = Field(
        default=DEFAULT_WAIT_SECONDS,
        ge=0,
        allow_inf_nan=False,
        description="seconds to wait for the result (capped by the server); 0: answer at once",
    )


async def _execute(call: Call[ExecuteBody, ExecuteQuery], address: ExecuteAddress) -> Reply:
    database = call.database
    execution: Execution = call.request.app.state.execution
    wait = min(call.query.wait, execution.settings.execute_max_wait_seconds)
    async with database.write_session() as session:
        job = await job_execution_service.submit(
            session, call.principal, address, call.body.inputs, execution.cache
        )
    if job.status not in TERMINAL and wait > 0:

        async def read() -> JobView:
            async with database.read_session() as session:
                return await job_execution_service.view(session, job.id)

        job = await execution.wait(job.id, wait, read)
    return Reply(200 if job.status in TERMINAL else 202, job)


rest = Operations(tag="execute")
_ANSWERS = {200: ExecuteOut, 202: ExecuteOut}
# 400: a package path that is not package[@version]/functions/name[@version].
_ERRORS = (400, 403, 404)


@rest(
    "POST",
    "/functions/{function_id}/execute",
    "Run a function (or a pinned function version) by identifier",
    _ANSWERS,
    errors=_ERRORS,
    body_required=False,
)
async def execute_function(call: Call[ExecuteBody, ExecuteQuery]) -> Reply:
    return await _execute(call, ExecuteAddress.by_function_id(call.path("function_id")))


@rest(
    "POST",
    "/packages/{package}/functions/{function}/execute",
    "Run a function by package and function name, each with an optional @version",
    _ANSWERS,
    errors=_ERRORS,
    body_required=False,
)
async def execute_package_function(call: Call[ExecuteBody, ExecuteQuery]) -> Reply:
    return await _execute(call, ExecuteAddress.by_path(call.path("package"), call.path("function")))
