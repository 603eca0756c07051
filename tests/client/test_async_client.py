"""`AsyncClient`: the same methods as `Client`, awaited, against the same real server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calcgraph.client import (
    AsyncClient,
    ConnectionError,
    NotFound,
    Run,
    Unauthenticated,
    ValidationError,
    quantity,
)
from calcgraph.demo import DEMO_INPUTS
from tests.client.conftest import DemoCopy, Served, free_port, unique
from tests.client.packages import tools_package


async def test_publish_execute_and_wait(served: Served, tmp_path: Path) -> None:
    name, directory = tools_package(tmp_path)
    async with AsyncClient(served.url, served.token("alice")) as cg:
        assert (await cg.health()).status == "ok"
        report = await cg.publish_directory(directory)
        assert report.package == name
        inputs = {"length": quantity(2, "m"), "factor": 1.5}
        result = await cg.execute(f"{name}/scale", inputs)
        assert result.status == "success"
        assert result.outputs == pytest.approx({"scaled": 3.0})
        queued = await cg.execute(f"{name}/scale", {"length": 1, "factor": 7}, wait=0)
        job = await cg.wait_for_job(queued.job_id, period=0.1, timeout=30)
        assert job.outputs == pytest.approx({"scaled": 7.0})
        seen = [j.id async for j in cg.iterate(cg.list_jobs, limit=1)]
        assert {result.job_id, job.id} <= set(seen)
        assert len(seen) == len(set(seen))


async def test_concurrent_runs_until_done(served: Served, demo: DemoCopy) -> None:
    async with AsyncClient(served.url, served.token("alice")) as cg:
        await cg.publish_directory(demo.directory)
        slug = unique("beam")
        created = await cg.create_workflow(slug, "Beam check", demo.graph)
        assert (await cg.validate_workflow(created.graph)).valid
        runs = [await cg.start_run(slug, DEMO_INPUTS) for _ in range(2)]
        updates: list[Run] = []
        finals = await asyncio.gather(
            *(cg.run_until_done(run.id, on_update=updates.append) for run in runs)
        )
        assert [f.status for f in finals] == ["completed", "completed"]
        assert {u.id for u in updates} == {r.id for r in runs}
        plan = await cg.get_run_plan(runs[0].id)
        assert set(plan.node_states) == set(finals[0].node_states)
        listed = await cg.list_runs(workflow=slug, status=["completed"], limit=500)
        assert {r.id for r in runs} <= {r.id for r in listed.items}


async def test_errors_are_the_same_classes(served: Served, tmp_path: Path) -> None:
    name, directory = tools_package(tmp_path)
    async with AsyncClient(served.url, served.token("alice")) as cg:
        await cg.publish_directory(directory)
        with pytest.raises(NotFound):
            await cg.get_job("missing")
        with pytest.raises(ValidationError) as caught:
            await cg.execute(f"{name}/scale", {"factor": "x"})
        assert caught.value.errors
    async with AsyncClient(served.url, None) as anonymous:
        with pytest.raises(Unauthenticated):
            await anonymous.list_workflows()
    async with AsyncClient(f"http://127.0.0.1:{free_port()}") as nowhere:
        with pytest.raises(ConnectionError):
            await nowhere.health()
