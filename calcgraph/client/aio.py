"""`AsyncClient`: the calcgraph API from asyncio code, with the methods of `Client`, awaited.

async with AsyncClient() as cg:
    run = await cg.start_run("beam-check", inputs)
    run = await cg.run_until_done(run.id)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from calcgraph.client import models as m
from calcgraph.client import operations as ops
from calcgraph.client.base import ClientBase
from calcgraph.client.operations import Call, Flow, Sleep

R = TypeVar("R")
M = TypeVar("M", bound=m.Model)


class AsyncClient(ClientBase):
    def __init__(self, url: str | None = None, token: str | None = None, **kw: Any) -> None:
        super().__init__(url, token, **kw)
        self._http = httpx.AsyncClient(base_url=self.url)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Drivers -----------------------------------------------------------------------------

    async def send(self, call: Call[R]) -> R:
        clock = self._retry_clock()
        while True:
            try:
                response = await self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            wait = clock.delay(response)
            if wait is None:
                return self._read(call, response)
            await asyncio.sleep(wait)

    async def drive(self, flow: Flow[R]) -> R:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(await self.send(step))
        except StopIteration as stop:
            result: R = stop.value
            return result
        finally:
            flow.close()

    async def iterate(
        self, lister: Callable[..., Awaitable[m.Page[M]]], **kwargs: Any
    ) -> AsyncIterator[M]:
        """Every item of a listing: `async for job in cg.iterate(cg.list_jobs):`."""
        cursor = kwargs.pop("cursor", None)
        while True:
            page = await lister(cursor=cursor, **kwargs)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # Service and identity ----------------------------------------------------------------

    async def health(self) -> m.Health:
        return await self.send(ops.health())

    async def check_connection(
        self, source: str | dict[str, Any], target: str | dict[str, Any]
    ) -> m.Compatibility:
        return await self.send(ops.check_connection(source, target))

    async def list_types(self) -> list[dict[str, Any]]:
        return await self.send(ops.list_types())

    async def graphql(
        self, query: str, variables: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return await self.send(ops.graphql(query, variables))

    async def me(self) -> m.User:
        return await self.send(ops.me())

    async def login_start(self) -> m.LoginStart:
        return await self.send(ops.login_start())

    async def login_complete(self, code: str, code_verifier: str) -> m.LoginResult:
        return await self.send(ops.login_complete(code, code_verifier))

    # Organizations -----------------------------------------------------------------------

    async def create_organization(self, slug: str, name: str) -> m.Organization:
        return await self.send(ops.create_organization(slug, name))

    async def get_organization(self, slug: str) -> m.Organization:
        return await self.send(ops.get_organization(slug))

    async def add_member(self, slug: str, username: str, role: str = "member") -> m.Member:
        return await self.send(ops.add_member(slug, username, role))

    async def remove_member(self, slug: str, username: str) -> None:
        return await self.send(ops.remove_member(slug, username))

    # Packages, functions, jobs -----------------------------------------------------------

    async def publish_package(
        self,
        manifest: Mapping[str, Any] | str,
        files: Mapping[str, str],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        return await self.send(ops.publish_package(manifest, files, visibility, organization))

    async def publish_directory(
        self,
        path: str | os.PathLike[str],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        manifest, files = ops.read_package_directory(path)
        return await self.publish_package(manifest, files, visibility, organization)

    async def deploy_git(
        self,
        git_url: str,
        ref: str,
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        return await self.send(ops.deploy_git(git_url, ref, visibility, organization))

    async def list_packages(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Package]:
        return await self.send(ops.list_packages(limit, cursor))

    async def get_package(self, package_id: str) -> m.Package:
        return await self.send(ops.get_package(package_id))

    async def list_functions(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Function]:
        return await self.send(ops.list_functions(limit, cursor))

    async def get_function(self, function_id: str) -> m.FunctionDetail:
        return await self.send(ops.get_function(function_id))

    async def execute(
        self,
        name_or_id: str,
        inputs: Mapping[str, Any] | None = None,
        version: str | None = None,
        wait: float | None = None,
    ) -> m.ExecuteResult:
        """Run a function (`package/function[@version]` or an id); `wait` seconds for it."""
        return await self.send(ops.execute(name_or_id, inputs, version, wait))

    async def list_jobs(self, limit: int | None = None, cursor: str | None = None) -> m.Page[m.Job]:
        return await self.send(ops.list_jobs(limit, cursor))

    async def get_job(self, job_id: str) -> m.Job:
        return await self.send(ops.get_job(job_id))

    async def wait_for_job(
        self,
        job_id: str,
        period: float = ops.DEFAULT_PERIOD,
        timeout: float | None = None,  # noqa: ASYNC109 - the flow's own deadline, as in Client
    ) -> m.Job:
        return await self.drive(ops.wait_for_job(job_id, period, timeout))

    # Workflows and runs ------------------------------------------------------------------

    async def create_workflow(
        self,
        slug: str,
        name: str,
        graph: Mapping[str, Any],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.WorkflowDetail:
        return await self.send(ops.create_workflow(slug, name, graph, visibility, organization))

    async def update_workflow(self, slug: str, graph: Mapping[str, Any]) -> m.WorkflowDetail:
        return await self.send(ops.update_workflow(slug, graph))

    async def validate_workflow(self, graph: Mapping[str, Any]) -> m.WorkflowValidation:
        return await self.send(ops.validate_workflow(graph))

    async def get_workflow(self, slug: str) -> m.WorkflowDetail:
        return await self.send(ops.get_workflow(slug))

    async def list_workflows(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Workflow]:
        return await self.send(ops.list_workflows(limit, cursor))

    async def start_run(self, slug: str, inputs: Mapping[str, Any] | None = None) -> m.Run:
        return await self.send(ops.start_run(slug, inputs))

    async def list_runs(
        self,
        limit: int | None = None,
        cursor: str | None = None,
        status: Sequence[str] = (),
        workflow: str | None = None,
    ) -> m.Page[m.RunSummary]:
        return await self.send(ops.list_runs(limit, cursor, status, workflow))

    async def get_run(self, run_id: str) -> m.Run:
        return await self.send(ops.get_run(run_id))

    async def get_run_plan(self, run_id: str) -> m.RunPlan:
        return await self.send(ops.get_run_plan(run_id))

    async def tick(self, run_id: str, wait: float | None = None) -> m.Run:
        return await self.send(ops.tick(run_id, wait))

    async def run_until_done(
        self,
        run_id: str,
        on_update: Callable[[m.Run], None] | None = None,
        period: float = ops.DEFAULT_PERIOD,
        long_poll: float | None = ops.MAX_TICK_WAIT,
        timeout: float | None = None,  # noqa: ASYNC109 - the flow's own deadline, as in Client
    ) -> m.Run:
        return await self.drive(ops.run_until_done(run_id, on_update, period, long_poll, timeout))
