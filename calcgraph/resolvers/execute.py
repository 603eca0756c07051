"""The `executeFunction` mutation: the same use case as the REST execute routes.

The execution service submits the job in one transaction (its message leaves after the commit),
then waits up to `wait` seconds outside any transaction; the field returns the job as it stands.
"""

from __future__ import annotations

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.commit_wait.waits import EXECUTE_WAIT
from calcgraph.domain.errors import InvalidRequest
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.domain.runs.control.service import run_control
from calcgraph.resolvers.unit import write
from calcgraph.resolvers.workflows import cache_refresh
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobType


def _address(
    function_id: strawberry.ID | None, package: str | None, function: str | None
) -> ExecuteAddress:
    if function_id is not None and package is None and function is None:
        return ExecuteAddress.by_function_id(str(function_id))
    if function_id is None and package is not None and function is not None:
        return ExecuteAddress.by_path(package, function)
    raise InvalidRequest(
        "name the function by `functionId`, or by `package` and `function` "
        "(each may carry @version)"
    )


@strawberry.type
class ExecuteMutation:
    @strawberry.mutation(
        description="Execute a function: by `functionId` (a function's or a function version's "
        "id), or by `package` (id or name, optionally `name@version`) and `function` (optionally "
        "`name@version`, `@latest`). Waits up to `wait` seconds (default 30, 0 allowed) and "
        "returns the job: finished, or still `queued`/`running`."
    )
    async def execute_function(
        self,
        info: Info,
        inputs: JSON,
        function_id: strawberry.ID | None = None,
        package: str | None = None,
        function: str | None = None,
        wait: float = EXECUTE_WAIT.default,
        cache: str | None = None,
    ) -> JobType:
        principal = principal_of(info)
        address = _address(function_id, package, function)
        refresh = cache_refresh(cache)
        execution = info.context.services.execution
        executed = await execution.execute(principal, address, inputs, wait, refresh=refresh)
        return JobType.from_view(executed.job)

    @strawberry.mutation(
        description="Cancel a `queued` or `running` job of the caller's: it ends `failed` "
        "with kind `cancelled` (its sandbox killed). A job that ended: `Conflict`."
    )
    async def cancel_job(self, info: Info, id: strawberry.ID) -> JobType:
        return JobType.from_view(await write(info, run_control.cancel_job, str(id)))
