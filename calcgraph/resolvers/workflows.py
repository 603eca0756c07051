"""Query and mutation fields of workflows and runs: thin calls into the workflow and run
services (the same ones the REST routes call)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Annotated, Unpack, cast

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.commit_wait.waits import FOLLOW_INTERVAL, TICK_WAIT
from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.runs.control.service import run_control
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.state import RUN_TERMINAL
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.resolvers.arguments import Owned, Paging, arguments, owner
from calcgraph.resolvers.unit import read, read_page, searched_listing, staged, write
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.selection import asks_for_plan
from calcgraph.schema.workflows import (
    WorkflowPage,
    WorkflowRunPage,
    WorkflowRunType,
    WorkflowType,
    WorkflowValidationType,
)


def cache_refresh(cache: str | None) -> bool:
    """The `cache` argument: absent, or `refresh` (contract section 10)."""
    if cache is None:
        return False
    if cache != "refresh":
        raise ValidationError(
            f"cache must be 'refresh', not {cache!r}", [FieldError(("cache",), "'refresh'")]
        )
    return True


def _graph(info: Info, graph: JSON) -> dict[str, object]:
    principal_of(info)  # a caller without a token hears that before any refusal of the graph
    if not isinstance(graph, dict):
        raise ValidationError(
            "graph is invalid", [FieldError(("graph",), 'an object {"nodes": [...]}')]
        )
    return graph


@strawberry.type
class WorkflowQuery:
    @strawberry.field(description="A workflow by slug, with its latest version.")
    async def workflow(self, info: Info, slug: str) -> WorkflowType:
        return WorkflowType.from_detail(await read(info, workflow_service.get, slug))

    workflows = searched_listing(
        workflow_service.list_workflows,
        WorkflowPage,
        WorkflowType.from_view,
        "Workflows the caller may see, oldest first; `search`: a case-insensitive part of the "
        "slug or the name.",
    )

    @strawberry.field(description="Validate a graph document: the report, or a ValidationError.")
    async def validate_workflow(self, info: Info, graph: JSON) -> WorkflowValidationType:
        report = await staged(info, workflow_service.validate_graph, _graph(info, graph))
        return WorkflowValidationType(valid=report.valid, report=cast(JSON, report.as_dict()))

    @strawberry.field(
        description="A run with its state; its version, node states, jobs and function "
        "versions resolve in one request."
    )
    async def workflow_run(self, info: Info, id: strawberry.ID) -> WorkflowRunType:
        # The plan (megabytes at 10,000 nodes) only for the fields that need it.
        plan = asks_for_plan(info)
        run = await read(info, run_service.get, str(id), states=False, plan=plan)
        return WorkflowRunType.from_view(run, plan=plan)

    @strawberry.field(
        description="The caller's runs, newest first; filter by status, workflow slug and "
        "start time: `startedAfter` (inclusive) and `startedBefore` (exclusive), ISO 8601 "
        "dates (midnight UTC) or date-times."
    )
    @arguments(Paging, after="workflow")
    async def workflow_runs(
        self,
        info: Info,
        status: list[str] | None = None,
        workflow: str | None = None,
        started_after: str | None = None,
        started_before: str | None = None,
        **paging: Unpack[Paging],
    ) -> WorkflowRunPage:
        return await read_page(
            info,
            run_service.list_runs,
            paging,
            WorkflowRunPage,
            WorkflowRunType.from_view,
            status or (),
            workflow,
            started_after=started_after,
            started_before=started_before,
        )


@strawberry.type
class WorkflowMutation:
    @strawberry.mutation(description="Create a workflow with its version 1.")
    @arguments(Owned)
    async def create_workflow(
        self, info: Info, slug: str, name: str, graph: JSON, **owned: Unpack[Owned]
    ) -> WorkflowType:
        checked = _graph(info, graph)
        visibility, organization = owner(owned)
        detail = await staged(
            info,
            workflow_service.create,
            slug=slug,
            name=name,
            graph=checked,
            visibility=visibility,
            organization_slug=organization,
            quotas=info.context.settings.quotas,
        )
        return WorkflowType.from_detail(detail)

    @strawberry.mutation(description="Save a new latest version of a workflow.")
    async def update_workflow(self, info: Info, slug: str, graph: JSON) -> WorkflowType:
        detail = await staged(
            info,
            workflow_service.update,
            slug,
            _graph(info, graph),
            quotas=info.context.settings.quotas,
        )
        return WorkflowType.from_detail(detail)

    @strawberry.mutation(
        description="Start a run of a workflow's latest version; nothing runs before a tick."
    )
    async def create_workflow_run(
        self,
        info: Info,
        workflow: str,
        inputs: JSON,
        cache: str | None = None,
    ) -> WorkflowRunType:
        refresh = cache_refresh(cache)
        run = await staged(
            info,
            run_service.create,
            workflow,
            inputs,
            refresh=refresh,
            quotas=info.context.settings.quotas,
        )
        return WorkflowRunType.from_view(run)

    @strawberry.mutation(
        description="Cancel a run: its pending and running nodes become `cancelled`, its "
        "running jobs are stopped (their sandboxes killed). A run that ended: `Conflict`."
    )
    async def cancel_run(self, info: Info, id: strawberry.ID) -> WorkflowRunType:
        return WorkflowRunType.from_view(await write(info, run_control.cancel_run, str(id)))

    @strawberry.mutation(
        description="Start a new run from a finished one (`rerunOf`). `from`: `failure` "
        "(default: nodes that succeeded with the same function version and inputs are reused) "
        "or `start`; `workflowVersion`: `same` (default) or `latest`; `inputs`: overrides."
    )
    async def rerun_run(
        self,
        info: Info,
        id: strawberry.ID,
        start_from: Annotated[str, strawberry.argument(name="from")] = "failure",
        workflow_version: str = "same",
        inputs: JSON | None = None,
    ) -> WorkflowRunType:
        run = await write(
            info,
            run_control.rerun,
            str(id),
            start_from=start_from,
            workflow_version=workflow_version,
            inputs=inputs,
        )
        return WorkflowRunType.from_view(run)

    @strawberry.mutation(
        description="Advance a run once. `wait` (seconds, up to 30) first waits until a job of "
        "the run finishes, so a client drives a run without busy polling."
    )
    async def tick_run(
        self, info: Info, id: strawberry.ID, wait: float = TICK_WAIT.default
    ) -> WorkflowRunType:
        principal = principal_of(info)
        execution = info.context.services.execution
        return WorkflowRunType.from_view(await execution.tick(principal, str(id), wait))


@strawberry.type
class WorkflowSubscription:
    @strawberry.subscription(
        description="Drive a run on the subscriber's behalf and push each changed state until "
        "it is terminal. The run is ticked every `interval` seconds (default 2; smaller is "
        "faster), and sooner when one of its jobs finishes; subscribers of one run share one "
        "ticking loop."
    )
    async def run_updates(
        self, info: Info, id: strawberry.ID, interval: float = FOLLOW_INTERVAL.default
    ) -> AsyncGenerator[WorkflowRunType, None]:
        principal = principal_of(info)
        execution = info.context.services.execution
        async with execution.follow(principal, str(id), interval) as updates:
            while (view := await updates.get()) is not None:
                info.context.renew_loaders()  # nested fields read now, under today's rules
                yield WorkflowRunType.from_view(view)
                if view.status in RUN_TERMINAL:
                    return
