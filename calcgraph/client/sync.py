"""`Client`: the calcgraph API from synchronous Python (scripts, notebooks, the CLI).

    from calcgraph.client import Client, quantity

    with Client() as cg:            # URL and token: arguments, environment, `calcgraph login`
        run = cg.start_run("beam-check", {"span": quantity(3, "m"), ...})
        run = cg.run_until_done(run.id, on_update=lambda r: print(r.status))
        print(run.terminal_outputs)

Every method is one call or flow of `calcgraph.client.operations`; `AsyncClient` has the
same methods, awaited.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from calcgraph.client import models as m
from calcgraph.client import operations as ops
from calcgraph.client.base import ClientBase
from calcgraph.client.operations import Call, Flow, Sleep

R = TypeVar("R")
M = TypeVar("M", bound=m.Model)


class Client(ClientBase):
    def __init__(self, url: str | None = None, token: str | None = None, **kw: Any) -> None:
        super().__init__(url, token, **kw)
        self._http = httpx.Client(base_url=self.url)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Drivers -----------------------------------------------------------------------------

    def send(self, call: Call[R]) -> R:
        clock = self._retry_clock()
        while True:
            try:
                response = self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            wait = clock.delay(response)
            if wait is None:
                return self._read(call, response)
            time.sleep(wait)

    def drive(self, flow: Flow[R]) -> R:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(self.send(step))
        except StopIteration as stop:
            result: R = stop.value
            return result
        finally:
            flow.close()

    def iterate(self, lister: Callable[..., m.Page[M]], **kwargs: Any) -> Iterator[M]:
        """Every item of a listing, page after page: `iterate(cg.list_jobs, limit=100)`."""
        cursor = kwargs.pop("cursor", None)
        while True:
            page = lister(cursor=cursor, **kwargs)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # Service and identity ----------------------------------------------------------------

    def health(self) -> m.Health:
        return self.send(ops.health())

    def check_connection(
        self, source: str | dict[str, Any], target: str | dict[str, Any]
    ) -> m.Compatibility:
        return self.send(ops.check_connection(source, target))

    def list_types(self) -> list[dict[str, Any]]:
        return self.send(ops.list_types())

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.send(ops.graphql(query, variables))

    def me(self) -> m.User:
        return self.send(ops.me())

    def login_start(self) -> m.LoginStart:
        return self.send(ops.login_start())

    def login_complete(self, code: str, code_verifier: str) -> m.LoginResult:
        return self.send(ops.login_complete(code, code_verifier))

    # Organizations -----------------------------------------------------------------------

    def create_organization(self, slug: str, name: str) -> m.Organization:
        return self.send(ops.create_organization(slug, name))

    def get_organization(self, slug: str) -> m.Organization:
        return self.send(ops.get_organization(slug))

    def add_member(self, slug: str, username: str, role: str = "member") -> m.Member:
        return self.send(ops.add_member(slug, username, role))

    def remove_member(self, slug: str, username: str) -> None:
        return self.send(ops.remove_member(slug, username))

    # Packages, functions, jobs -----------------------------------------------------------

    def publish_package(
        self,
        manifest: Mapping[str, Any] | str,
        files: Mapping[str, str],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        return self.send(ops.publish_package(manifest, files, visibility, organization))

    def publish_directory(
        self,
        path: str | os.PathLike[str],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        manifest, files = ops.read_package_directory(path)
        return self.publish_package(manifest, files, visibility, organization)

    def deploy_git(
        self,
        git_url: str,
        ref: str,
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.DeploymentReport:
        return self.send(ops.deploy_git(git_url, ref, visibility, organization))

    def list_packages(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Package]:
        return self.send(ops.list_packages(limit, cursor))

    def get_package(self, package_id: str) -> m.Package:
        return self.send(ops.get_package(package_id))

    def list_functions(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Function]:
        return self.send(ops.list_functions(limit, cursor))

    def get_function(self, function_id: str) -> m.FunctionDetail:
        return self.send(ops.get_function(function_id))

    def execute(
        self,
        name_or_id: str,
        inputs: Mapping[str, Any] | None = None,
        version: str | None = None,
        wait: float | None = None,
    ) -> m.ExecuteResult:
        """Run a function (`package/function[@version]` or an id); `wait` seconds for it."""
        return self.send(ops.execute(name_or_id, inputs, version, wait))

    def list_jobs(self, limit: int | None = None, cursor: str | None = None) -> m.Page[m.Job]:
        return self.send(ops.list_jobs(limit, cursor))

    def get_job(self, job_id: str) -> m.Job:
        return self.send(ops.get_job(job_id))

    def wait_for_job(
        self, job_id: str, period: float = ops.DEFAULT_PERIOD, timeout: float | None = None
    ) -> m.Job:
        return self.drive(ops.wait_for_job(job_id, period, timeout))

    # Workflows and runs ------------------------------------------------------------------

    def create_workflow(
        self,
        slug: str,
        name: str,
        graph: Mapping[str, Any],
        visibility: str | None = None,
        organization: str | None = None,
    ) -> m.WorkflowDetail:
        return self.send(ops.create_workflow(slug, name, graph, visibility, organization))

    def update_workflow(self, slug: str, graph: Mapping[str, Any]) -> m.WorkflowDetail:
        return self.send(ops.update_workflow(slug, graph))

    def validate_workflow(self, graph: Mapping[str, Any]) -> m.WorkflowValidation:
        return self.send(ops.validate_workflow(graph))

    def get_workflow(self, slug: str) -> m.WorkflowDetail:
        return self.send(ops.get_workflow(slug))

    def list_workflows(
        self, limit: int | None = None, cursor: str | None = None
    ) -> m.Page[m.Workflow]:
        return self.send(ops.list_workflows(limit, cursor))

    def start_run(self, slug: str, inputs: Mapping[str, Any] | None = None) -> m.Run:
        return self.send(ops.start_run(slug, inputs))

    def list_runs(
        self,
        limit: int | None = None,
        cursor: str | None = None,
        status: Sequence[str] = (),
        workflow: str | None = None,
    ) -> m.Page[m.RunSummary]:
        return self.send(ops.list_runs(limit, cursor, status, workflow))

    def get_run(self, run_id: str) -> m.Run:
        return self.send(ops.get_run(run_id))

    def get_run_plan(self, run_id: str) -> m.RunPlan:
        return self.send(ops.get_run_plan(run_id))

    def tick(self, run_id: str, wait: float | None = None) -> m.Run:
        return self.send(ops.tick(run_id, wait))

    def run_until_done(
        self,
        run_id: str,
        on_update: Callable[[m.Run], None] | None = None,
        period: float = ops.DEFAULT_PERIOD,
        long_poll: float | None = ops.MAX_TICK_WAIT,
        timeout: float | None = None,
    ) -> m.Run:
        return self.drive(ops.run_until_done(run_id, on_update, period, long_poll, timeout))
