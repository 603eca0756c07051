"""Execute routes: every addressing form of the specification, answered per contract 4.

The execution service (`calcgraph.domain.commit_wait`) creates the job (or answers it from the
result cache) in one unit of work, then waits up to `wait` seconds for the result outside any
transaction: 200 with outputs or error when the job ended, else 202 with its id and status.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Literal

from pydantic import Field

from calcgraph.domain.commit_wait.waits import EXECUTE_WAIT
from calcgraph.domain.jobs.views import TERMINAL
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.rest_compat.operations import Call, Operations, Reply
from calcgraph.rest_compat.parsing import Query, Refusal
from calcgraph.rest_compat.wire_execute import ExecuteBody, ExecuteOut

WAIT = ("query", "wait")


class ExecuteQuery(Query):
    # The bound is the execution service's (which also applies the operator's cap); declared
    # here for the parsing and the OpenAPI document.
    wait: Annotated[float, Refusal(EXECUTE_WAIT.message, EXECUTE_WAIT.expected)] = Field(
        default=EXECUTE_WAIT.default,
        ge=EXECUTE_WAIT.low,
        allow_inf_nan=False,
        description="seconds to wait for the result (capped by the server); 0: answer at once",
    )
    cache: Literal["refresh"] | None = Field(
        default=None,
        description="`refresh`: never answered from the result cache; the new result is "
        "stored (contract 10)",
    )


async def _execute(call: Call[ExecuteBody, ExecuteQuery], address: ExecuteAddress) -> Reply:
    execution = call.services.execution
    executed = await execution.execute(
        call.principal,
        address,
        call.body.inputs,
        call.query.wait,
        where=WAIT,
        refresh=call.query.cache == "refresh",
    )
    status = 200 if executed.job.status in TERMINAL else 202
    # Contract 11: a deprecated version says so in a header (RFC 9745) and in `warnings`.
    deprecation = executed.deprecation
    headers = {"Deprecation": deprecation.header} if deprecation is not None else {}
    return Reply(status, executed, headers)


rest = Operations(tag="execute")
# Every addressing form is the same operation to the contract: the same answers and errors
# (400: a package path that is not package[@version]/functions/name[@version]), and an empty
# body is no inputs.
execute_operation = partial(
    rest, answers={200: ExecuteOut, 202: ExecuteOut}, errors=(400, 403), body_required=False
)


@execute_operation("POST", "/functions/{function_id}/execute")
async def execute_function(call: Call[ExecuteBody, ExecuteQuery]) -> Reply:
    """Run a function (or a pinned function version) by identifier"""
    return await _execute(call, ExecuteAddress.by_function_id(call.path("function_id")))


@execute_operation("POST", "/packages/{package}/functions/{function}/execute")
async def execute_package_function(call: Call[ExecuteBody, ExecuteQuery]) -> Reply:
    """Run a function by package and function name, each with an optional @version"""
    return await _execute(call, ExecuteAddress.by_path(call.path("package"), call.path("function")))
