"""Run control (issue 25, contract section 10), in one process: the ASGI app over httpx (the same
routes a client calls), the in-process workers with their default cancel check
(`CALCGRAPH_JOB_CANCEL_CHECK_SECONDS`, 1 s), PostgreSQL.

- `run_control_cancel_bwrap`, `run_control_cancel_docker`: a one-node run whose job sleeps 10
  minutes, running in its sandbox; the time from `POST /workflow-runs/{id}/cancel` to that
  sandbox gone (bwrap: the sandbox's process ended and its cgroup empty; docker: the container
  removed from the engine), p50/p99 over `CANCELS` cancels, with the time to the cancel's answer,
  this process's CPU per cancel (API, worker, kill; docker: plus dockerd's and containerd's) and
  the load average.
- `run_control_rerun_1000`: a run of 1,000 function nodes (a chain of 999 `inc`, then a `guard`
  that fails for the run's `lim`), failed at its last node; `POST .../rerun` from failure with
  `lim` overridden: the jobs it submitted (must be 1) and its time from the POST to `completed`,
  against a fresh run of the same graph with new inputs (1,000 jobs, none answered from the
  result cache), each with this process's CPU and the load average.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.core import Options, Result, summarise
from bench.scale_client import cpu_seconds
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.migrations.runner import upgrade
from calcgraph.workers.runtime import CodeRuntime
from calcgraph.workers.sandbox.base import Sandbox
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import _reset_postgres
from tests.execution.conftest import Platform, running_platform
from tests.packages.publishing import publish, small_body
from tests.sandbox.conftest import _make_backend
from tests.workflows.graphs import fn, inp

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_BENCH_POSTGRES_URL",
    "postgresql+asyncpg://postgres@127.0.0.1:5432/cg_run_control_bench",
)
CANCELS = {"bwrap": 20, "docker": 10}
CHAIN = 999
TERMINAL = ("completed", "failed", "cancelled")
NAP_S = 600.0
CODE = """
import time

def inc(x):
    return {"y": x + 1}

def guard(a, limit):
    if a > limit:
        raise ValueError(f"{a} is over {limit}")
    return {"y": a}

def nap(x):
    time.sleep(x)
    return {"y": x}
"""
F = {"type": "Float", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "guard": {"handler": "main:guard", "inputs": {"a": F, "limit": F}, "outputs": OUT},
    "nap": {"handler": "main:nap", "inputs": {"x": F}, "outputs": OUT},
}


def _self_cpu() -> float:
    return cpu_seconds(os.getpid())


def _engine_pids() -> list[int]:
    """dockerd and containerd (the engine's share of a container's stop and removal)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm in ("dockerd", "containerd"):
                found.append(int(entry.name))
    return found


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@asynccontextmanager
async def _platform(sandbox: str) -> AsyncIterator[Platform]:
    await _reset_postgres(POSTGRES_URL)
    migrator = Database(POSTGRES_URL)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    idp = LocalIdentityProvider().start()
    try:
        with tempfile.TemporaryDirectory(prefix="cg-run-control-bench-") as tmp:
            async with running_platform(
                POSTGRES_URL, idp, Path(tmp), sandbox, sandbox_timeout_seconds=NAP_S * 2
            ) as platform:
                yield platform
    finally:
        idp.stop()


async def _ok(response: Any, status: int = 200) -> dict[str, Any]:
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.url} answered {response.status_code}: {response.text[:300]}"
        )
    body: dict[str, Any] = response.json()
    return body


async def _package(platform: Platform) -> str:
    name = f"rc-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    return name


async def _workflow(platform: Platform, nodes: list[dict[str, Any]]) -> str:
    slug = f"wf-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    await _ok(await platform.client.post("/workflows", json=body, headers=platform.headers()), 201)
    return slug


async def _tick(platform: Platform, run_id: str, wait: float = 0.0) -> dict[str, Any]:
    params = {"wait": wait} if wait else {}
    return await _ok(
        await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params=params, headers=platform.headers()
        )
    )


async def _to_end(platform: Platform, run_id: str, limit_s: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while True:
        run = await _tick(platform, run_id, wait=5)
        if run["status"] in TERMINAL:
            return run
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not end in {limit_s:.0f} s")


def _sandbox_of(runtime: CodeRuntime, job_id: str) -> Sandbox | None:
    # The bench reads the worker's own map: the sandbox a job runs on, to watch it go.
    watch = runtime.running._watches.get(job_id)
    return None if watch is None else watch._sandbox


def _process_gone(details: dict[str, Any]) -> bool:
    try:
        state = Path(f"/proc/{details['pid']}/stat").read_text().rpartition(")")[2].split()[0]
        if state != "Z":
            return False
    except OSError:
        pass
    for folder in details.get("cgroups") or []:
        try:
            if Path(folder, "cgroup.procs").read_text().strip():
                return False
        except OSError:
            pass  # removed with its last process
    return True


def _container_gone(client: Any, container_id: str) -> bool:
    import docker.errors

    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return True
    return False


async def _cancel_latencies(sandbox: str, cancels: int) -> list[Result]:
    async with _platform(sandbox) as platform:
        runtime = platform.runtime
        assert isinstance(runtime, CodeRuntime)
        name = await _package(platform)
        slug = await _workflow(platform, [inp("x"), fn("n", f"{name}/nap", x="x")])
        docker_client = None
        if sandbox == "docker":
            import docker

            docker_client = docker.from_env()
        engine = _engine_pids() if sandbox == "docker" else []
        gone_ns: list[int] = []
        answered_ns: list[int] = []
        cpu = engine_cpu = 0.0
        t_all = time.perf_counter()
        for index in range(cancels):
            created = await _ok(
                await platform.client.post(
                    f"/workflows/{slug}/runs",
                    json={"inputs": {"x": NAP_S + index}},
                    headers=platform.headers(),
                ),
                201,
            )
            run = await _tick(platform, created["id"])
            job_id = run["node_states"]["n"]["job_id"]
            deadline = time.monotonic() + 120
            found = _sandbox_of(runtime, job_id)
            while found is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the job never ran in a sandbox")
                await asyncio.sleep(0.02)
                found = _sandbox_of(runtime, job_id)
            details = dict(getattr(found, "details", {}))
            await asyncio.sleep(0.5)  # inside the handler's sleep
            cpu0, engine0 = _self_cpu(), _cpu_of(engine)
            t0 = time.perf_counter_ns()
            await _ok(
                await platform.client.post(
                    f"/workflow-runs/{created['id']}/cancel", headers=platform.headers()
                )
            )
            answered_ns.append(time.perf_counter_ns() - t0)
            while not (
                _container_gone(docker_client, details["container_id"])
                if docker_client is not None
                else _process_gone(details)
            ):
                if time.perf_counter_ns() - t0 > 60e9:
                    raise RuntimeError(f"the sandbox of {job_id} is still there after 60 s")
                await asyncio.sleep(0.005)
            gone_ns.append(time.perf_counter_ns() - t0)
            cpu += _self_cpu() - cpu0
            engine_cpu += _cpu_of(engine) - engine0
        elapsed = time.perf_counter() - t_all
        if docker_client is not None:
            docker_client.close()
        extra: dict[str, object] = {
            "cpu_ms_per_cancel_this_process": round(cpu / cancels * 1000, 1),
            "loadavg": _load(),
        }
        if engine:
            extra["cpu_ms_per_cancel_dockerd_containerd"] = round(engine_cpu / cancels * 1000, 1)
        setup = (
            f"in-process ASGI + workers, PostgreSQL, {sandbox}, cancel check "
            f"{platform.settings.job_cancel_check_seconds:g} s, {cancels} cancels one at a time"
        )
        gone_what = "container removed" if sandbox == "docker" else "process ended, cgroup empty"
        return [
            summarise(
                f"run_control_cancel_{sandbox}",
                f"POST cancel -> sandbox gone ({gone_what})",
                setup,
                gone_ns,
                elapsed,
                extra=extra,
            ),
            summarise(
                f"run_control_cancel_{sandbox}",
                "POST cancel -> its 200 answer",
                setup,
                answered_ns,
                elapsed,
                extra={"loadavg": _load()},
            ),
        ]


def _cancel(sandbox: str) -> Any:
    def benchmark(options: Options) -> list[Result]:
        found = _make_backend(sandbox)
        if isinstance(found, str):
            raise RuntimeError(f"the {sandbox} sandbox is not available here: {found}")
        return asyncio.run(_cancel_latencies(sandbox, CANCELS[sandbox]))

    return benchmark


async def _jobs_of(platform: Platform, run_id: str) -> tuple[int, int]:
    """(jobs of the run, those answered from the result cache)."""
    async with platform.database.read_session() as session:
        row = (
            await session.execute(
                select(func.count(), func.count().filter(Job.cache_hit.is_(True))).where(
                    Job.workflow_run_id == run_id
                )
            )
        ).one()
        return int(row[0]), int(row[1])


async def _timed(platform: Platform, post: Any) -> tuple[dict[str, Any], float, float]:
    """The run a POST created, driven to its end: (run, seconds, CPU seconds of this process)."""
    cpu0, t0 = _self_cpu(), time.perf_counter()
    created = await _ok(await post(), 201)
    run = await _to_end(platform, created["id"])
    return run, time.perf_counter() - t0, _self_cpu() - cpu0


async def _rerun_1000() -> list[Result]:
    async with _platform("bwrap") as platform:
        name = await _package(platform)
        nodes = [inp("x"), inp("lim"), fn("n000", f"{name}/inc", x="x")]
        nodes += [fn(f"n{i:03d}", f"{name}/inc", x=f"n{i - 1:03d}.y") for i in range(1, CHAIN)]
        nodes.append(fn("g", f"{name}/guard", a=f"n{CHAIN - 1:03d}.y", limit="lim"))
        slug = await _workflow(platform, nodes)
        headers = platform.headers()

        def start(inputs: dict[str, float]) -> Any:
            return lambda: platform.client.post(
                f"/workflows/{slug}/runs", json={"inputs": inputs}, headers=headers
            )

        failed, first_s, first_cpu = await _timed(platform, start({"x": 1.0, "lim": 0.0}))
        if (failed["status"], failed["first_failed_node_key"]) != ("failed", "g"):
            raise RuntimeError(f"the first run ended {failed['status']}, not failed at g")
        load_before = _load()
        rerun, rerun_s, rerun_cpu = await _timed(
            platform,
            lambda: platform.client.post(
                f"/workflow-runs/{failed['id']}/rerun",
                json={"from": "failure", "inputs": {"lim": 1e9}},
                headers=headers,
            ),
        )
        rerun_load = _load()
        # x = 0.5: no node's inputs equal one of the first run's (x = 2 would make node i's
        # inputs node i+1's of the first run, all answered from the result cache).
        fresh, fresh_s, fresh_cpu = await _timed(platform, start({"x": 0.5, "lim": 1e9}))
        fresh_load = _load()
        for run in (rerun, fresh):
            if run["status"] != "completed":
                raise RuntimeError(f"run {run['id']} ended {run['status']}")
        rerun_jobs, rerun_hits = await _jobs_of(platform, rerun["id"])
        fresh_jobs, fresh_hits = await _jobs_of(platform, fresh["id"])
        reused = sum(1 for s in rerun["node_states"].values() if s.get("reused"))
        setup = (
            f"in-process ASGI + workers, PostgreSQL, bwrap, {CHAIN + 1} function nodes "
            f"(chain of {CHAIN} inc + guard), chain execution "
            f"{platform.settings.chain_execution}, long-poll ticks (wait=5)"
        )
        return [
            summarise(
                "run_control_rerun_1000",
                "re-run from failure (last node failed) -> completed",
                setup,
                [int(rerun_s * 1e9)],
                rerun_s,
                errors=0 if rerun_jobs == 1 else 1,
                extra={
                    "jobs_submitted": rerun_jobs,
                    "cache_hits": rerun_hits,
                    "nodes_reused": reused,
                    "cpu_ms_this_process": round(rerun_cpu * 1000, 1),
                    "loadavg_before": load_before,
                    "loadavg": rerun_load,
                },
            ),
            summarise(
                "run_control_rerun_1000",
                "fresh run of the same graph -> completed",
                setup,
                [int(fresh_s * 1e9)],
                fresh_s,
                extra={
                    "jobs_submitted": fresh_jobs,
                    "cache_hits": fresh_hits,
                    "cpu_ms_this_process": round(fresh_cpu * 1000, 1),
                    "cpu_ms_per_job": round(fresh_cpu * 1000 / max(1, fresh_jobs), 2),
                    "first_failed_run_s": round(first_s, 2),
                    "first_failed_run_cpu_ms": round(first_cpu * 1000, 1),
                    "loadavg": fresh_load,
                },
            ),
        ]


def rerun_1000(options: Options) -> list[Result]:
    return asyncio.run(_rerun_1000())


BENCHMARKS = {
    "run_control_cancel_bwrap": _cancel("bwrap"),
    "run_control_cancel_docker": _cancel("docker"),
    "run_control_rerun_1000": rerun_1000,
}
