"""The `executeFunction` mutation: the same use case as the REST execute routes.

The job is submitted in one transaction (its message leaves after the commit), then the field
waits up to `wait` seconds outside any transaction and returns the job as it stands.
"""

from __future__ import annotations

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.errors import FieldError, InvalidRequest, ValidationError
from calcgraph.domain.jobs.address import ExecuteAddress
from calcgraph.domain.jobs.execution.service import TERMINAL, job_execution_service
from calcgraph.domain.jobs.views import JobView
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobType
from calcgraph.workers.inprocess import Execution


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
        wait: float = 30.0,
    ) -> JobType:
        principal = principal_of(info)
        address = _address(function_id, package, function)
        database = info.context.database
        execution: Execution = info.context.request.app.state.execution
        if not wait >= 0:
            raise ValidationError(
                "wait must be 0 or more seconds", [FieldError(("wait",), "expected >= 0")]
            )
        wait = min(wait, execution.settings.execute_max_wait_seconds)
        async with database.write_session() as session:
            job = await job_execution_service.submit(
                session, principal, address, inputs, execution.cache
            )
        if job.status not in TERMINAL and wait > 0:

            async def read() -> JobView:
                async with database.read_session() as session:
                    return await job_execution_service.view(session, job.id)

            job = await execution.wait(job.id, wait, read)
        return JobType.from_view(job)
