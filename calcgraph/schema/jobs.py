"""GraphQL types of jobs: a job points at its package and function, through the loaders."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types.lazy_type import LazyType

from calcgraph.domain.errors import PermissionDenied
from calcgraph.domain.jobs.views import JobView
from calcgraph.schema.access import loaders_of
from calcgraph.schema.context import Info
from calcgraph.schema.packages import FunctionType, PackageType, package_or_denied
from calcgraph.schema.pages import Page
from calcgraph.schema.viewed import FromView

if TYPE_CHECKING:
    from calcgraph.schema.workflows import WorkflowRunType

_RUN_TYPE: LazyType[Any, Any] = LazyType("WorkflowRunType", "calcgraph.schema.workflows")


@strawberry.type(name="Job", description="One execution of a function.")
class JobType(FromView[JobView]):
    id: str = strawberry.field(description="Identifier.")
    status: str = strawberry.field(description="`queued`, `running`, `success` or `failed`.")
    function_id: str = strawberry.field(description="Function executed.")
    function_version_id: str = strawberry.field(description="Exact version executed.")
    package_id: str = strawberry.field(description="Package of the function.")
    inputs: JSON | None = strawberry.field(
        description="Inputs as sent; null in a listing when over 64 KiB (`inputsOmitted`)."
    )
    outputs: JSON | None = strawberry.field(
        description="Outputs on success; null in a listing when over 64 KiB (`outputsOmitted`)."
    )
    error: JSON | None = strawberry.field(description="`kind` and `message` on failure.")
    logs: str | None = strawberry.field(description="Captured output, truncated to 64 KiB.")
    cache_hit: bool = strawberry.field(description="Answered from the result cache.")
    created_at: datetime = strawberry.field(description="Submission time.")
    started_at: datetime | None = strawberry.field(description="Start of execution.")
    finished_at: datetime | None = strawberry.field(description="End of execution.")
    outputs_omitted: bool = strawberry.field(
        default=False,
        description="The outputs are over 64 KiB and left out of this listing; `job(id)` "
        "reads them whole.",
    )
    inputs_omitted: bool = strawberry.field(
        default=False,
        description="The inputs are over 64 KiB (they may hold upstream outputs) and left out "
        "of this listing; `job(id)` reads them whole.",
    )
    workflow_run_id: str | None = strawberry.field(
        default=None, description="The workflow run whose node this job ran; null otherwise."
    )
    node_key: str | None = strawberry.field(
        default=None, description="The node of that run this job ran; null otherwise."
    )

    @strawberry.field(
        description="The workflow run whose node this job ran (one batched read for a page of "
        "jobs); null for a direct execution or a run the caller may no longer see."
    )
    async def run(
        self, info: Info
    ) -> Annotated[WorkflowRunType, strawberry.lazy("calcgraph.schema.workflows")] | None:
        if self.workflow_run_id is None:
            return None
        # The higher module's type, as strawberry.lazy resolves it (no import circle).
        run_type = _RUN_TYPE.resolve_type()
        return cast("WorkflowRunType | None", await run_type.visible(info, self.workflow_run_id))

    @strawberry.field(description="The package of the job's function.")
    async def package(self, info: Info) -> PackageType:
        return await package_or_denied(info, self.package_id)

    @strawberry.field(description="The function the job executed.")
    async def function(self, info: Info) -> FunctionType:
        function = await loaders_of(info).function_by_id.load(self.function_id)
        if function is None:
            raise PermissionDenied(f"you may not access function {self.function_id!r}")
        return FunctionType.from_view(function)


@strawberry.type(description="A page of jobs.")
class JobPage(Page[JobType], items="Jobs of this page, newest first."): ...
