"""Workflow run benchmarks (issue 7), medians over at least 20 runs each.

- `workflow_diamond_asgi`: a diamond of four trivial functions, from run creation to
  `completed`, driven by long-poll ticks (`?wait=`) through the API in-process (ASGI, no
  socket), in-process broker, warm sandboxes, SQLite. Target: p50 under 150 ms.
- `workflow_chain40_asgi`: a chain of 40 nodes each computing fibo(10), the same way. Target: p50
  under 1.0 s.
  Both measure both ways (`CALCGRAPH_CHAIN_EXECUTION`): one platform per mode, runs
  alternating between them, one result row per mode (`extra` holds both p50s side by side).
- `workflow_tick_1000_service_memo_nosend`: one tick (the service call, one commit; no HTTP,
  no auth) on a run of 1,000 nodes on PostgreSQL, the run's states in the process's memo (a
  hit every time) and jobs sent to a no-op outbox (no broker send): when nothing changed
  (target p50 under 5 ms) and when it submits 100 nodes (target under 20 ms); `extra` gives
  the statement counts per tick for 100- and 1,000-node runs (they do not grow with the run).
  The end-to-end figures (HTTP through uvicorn, token, real Redis send) are
  bench_scale_tick's `scale_tick_submit_redis_http`.
- `workflow_graphql_asgi_1000_nodes_100_jobs`: the nested GraphQL run query (node states with
  job and function version, workflow version) on a run of 1,000 nodes of which 100 have a job,
  through ASGI in-process. Target: p99 under 60 ms.

PostgreSQL: `CALCGRAPH_BENCH_POSTGRES_URL` (default .../cg_runs_bench, reset at start).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event
from starlette.applications import Starlette

from bench.core import Options, Result, summarise
from calcgraph import heap
from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.result_cache import InProcessResultCache
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import _reset_postgres
from tests.execution.factories import Deployed, deploy

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/cg_runs_bench"
)
RUNS = 20
TERMINAL = ("completed", "failed", "cancelled")
CODE = """
def inc(x):
    return {"y": x + 1}

def add(a, b):
    return {"y": a + b}

def _fibo(n):
    return n if n < 2 else _fibo(n - 1) + _fibo(n - 2)

def fibo(x):
    return {"y": x + _fibo(10)}
"""
F = {"type": "Float", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "add": {"handler": "main:add", "inputs": {"a": F, "b": F}, "outputs": OUT},
    "fibo": {"handler": "main:fibo", "inputs": {"x": F}, "outputs": OUT},
}


def _input(key: str) -> dict[str, Any]:
    return {"node_key": key, "kind": "input", "input_spec": {"type_expr": "Float"}}


def _fn(key: str, function: str, **ports: str) -> dict[str, Any]:
    bindings = {}
    for port, source in ports.items():
        if "." in source:
            node, out = source.split(".", 1)
            bindings[port] = {"source": "edge", "from_node_key": node, "from_port": out}
        else:
            bindings[port] = {"source": "input_node", "input_key": source, "from_port": "value"}
    return {"node_key": key, "kind": "function", "function": function, "input_bindings": bindings}


def diamond(pkg: str) -> list[dict[str, Any]]:
    return [
        _input("x"),
        _fn("A", f"{pkg}/inc", x="x"),
        _fn("B", f"{pkg}/inc", x="A.y"),
        _fn("C", f"{pkg}/inc", x="A.y"),
        _fn("D", f"{pkg}/add", a="B.y", b="C.y"),
    ]


def chain(pkg: str, length: int) -> list[dict[str, Any]]:
    nodes = [_input("x"), _fn("n0", f"{pkg}/fibo", x="x")]
    return nodes + [_fn(f"n{i}", f"{pkg}/fibo", x=f"n{i - 1}.y") for i in range(1, length)]


def parallel_chains(pkg: str, chains: int, length: int) -> list[dict[str, Any]]:
    """`chains` independent chains of `length` nodes: the first tick submits `chains` nodes."""
    nodes = [_input("x")]
    for c in range(chains):
        nodes.append(_fn(f"c{c}n0", f"{pkg}/inc", x="x"))
        nodes += [_fn(f"c{c}n{i}", f"{pkg}/inc", x=f"c{c}n{i - 1}.y") for i in range(1, length)]
    return nodes


@dataclass
class Platform:
    app: Starlette
    client: httpx.AsyncClient
    database: Database
    headers: dict[str, str]
    owner: Principal
    deployed: Deployed

    async def workflow(self, nodes: list[dict[str, Any]]) -> str:
        slug = f"bench-{uuid.uuid4().hex[:8]}"
        body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
        response = await self.client.post("/workflows", json=body, headers=self.headers)
        if response.status_code != 201:
            raise RuntimeError(f"workflow refused: {response.text}")
        return slug

    async def run_to_end(self, slug: str, x: float) -> dict[str, Any]:
        created = await self.client.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=self.headers
        )
        run: dict[str, Any] = created.json()
        path = f"/workflow-runs/{run['id']}/tick"
        run = (await self.client.post(path, headers=self.headers)).json()
        while run["status"] not in TERMINAL:
            run = (await self.client.post(path, params={"wait": 5}, headers=self.headers)).json()
        if run["status"] != "completed":
            raise RuntimeError(f"run ended {run['status']}: {run['error_message']}")
        return run


async def _url(postgres: bool, tmp: Path) -> str:
    if postgres:
        await _reset_postgres(POSTGRES_URL)
        url = POSTGRES_URL
    else:
        url = f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
    migrator = Database(url)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    return url


@contextlib.asynccontextmanager
async def platform(
    *, postgres: bool = False, workers: bool = True, **overrides: Any
) -> AsyncIterator[Platform]:
    idp = LocalIdentityProvider().start()
    tmp = Path(tempfile.mkdtemp(prefix="calcgraph-bench-wf-"))
    url = await _url(postgres, tmp)
    settings = Settings(
        _env_file=None,
        database_url=url,
        oidc_issuer=idp.issuer,
        code_cache_dir=tmp / "code",
        inprocess_worker_threads=4,
        **overrides,
    )
    database = Database(url)
    app = create_app(settings, database)
    try:
        lifespan = app.router.lifespan_context(app) if workers else contextlib.nullcontext()
        async with lifespan:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                owner = await create_user(database, idp, "alice")
                deployed = await deploy(
                    database, owner, files={"main.py": CODE}, functions=FUNCTIONS
                )
                yield Platform(app, client, database, idp.headers("alice"), owner, deployed)
    finally:
        if not workers:
            await app.state.execution.close()
        await database.dispose()
        idp.stop()


MODES = ("chain", "node")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _end_to_end(name: str, scenario: str, nodes_of: Any, runs: int) -> list[Result]:
    """Both modes side by side; besides wall time (which moves with a shared machine's load),
    the process CPU time, SQL statements (API and workers) and ticks that changed the run,
    per run, which do not."""

    async def run() -> list[Result]:
        async with contextlib.AsyncExitStack() as stack:
            benches = {
                m: await stack.enter_async_context(platform(chain_execution=m)) for m in MODES
            }
            statements = dict.fromkeys(MODES, 0)
            for mode, bench in benches.items():
                runtime = bench.app.state.execution.runtime
                for engine in (bench.database.engine, runtime.database.engine):

                    def count(*_: Any, mode: str = mode) -> None:
                        statements[mode] += 1

                    event.listen(engine.sync_engine, "before_cursor_execute", count)
            slugs = {}
            for mode, bench in benches.items():
                slugs[mode] = await bench.workflow(nodes_of(bench.deployed.package_name))
                await bench.run_to_end(slugs[mode], -1.0)  # warm: sandboxes started, code staged
            latencies: dict[str, list[int]] = {m: [] for m in MODES}
            cpu: dict[str, list[float]] = {m: [] for m in MODES}
            sql: dict[str, list[float]] = {m: [] for m in MODES}
            ticks: dict[str, list[float]] = {m: [] for m in MODES}
            elapsed = dict.fromkeys(MODES, 0.0)
            for i in range(runs):
                for mode in MODES if i % 2 == 0 else MODES[::-1]:  # alternate: same noise
                    x = i + time.time() % 1  # fresh inputs: no result-cache hits
                    before_sql, before_cpu = statements[mode], time.process_time()
                    start = time.perf_counter_ns()
                    done = await benches[mode].run_to_end(slugs[mode], x)
                    took = time.perf_counter_ns() - start
                    cpu[mode].append(time.process_time() - before_cpu)
                    sql[mode].append(statements[mode] - before_sql)
                    ticks[mode].append(done["revision"])
                    latencies[mode].append(took)
                    elapsed[mode] += took / 1e9
        side_by_side: dict[str, object] = {}
        for m in MODES:
            side_by_side[f"p50_ms_{m}"] = round(_median([t / 1e6 for t in latencies[m]]), 1)
            side_by_side[f"cpu_ms_{m}"] = round(_median(cpu[m]) * 1000, 1)
            side_by_side[f"statements_{m}"] = _median(sql[m])
            side_by_side[f"changing_ticks_{m}"] = _median(ticks[m])
        return [
            summarise(
                name,
                f"{scenario}, {mode} execution",
                "ASGI in-process, long-poll ticks, in-process broker, warm sandboxes, SQLite",
                latencies[mode],
                elapsed[mode],
                extra=side_by_side,
            )
            for mode in MODES
        ]

    return asyncio.run(run())


def diamond_run(options: Options) -> list[Result]:
    return _end_to_end("workflow_diamond_asgi", "diamond of 4 trivial functions", diamond, RUNS)


def chain40(options: Options) -> list[Result]:
    return _end_to_end(
        "workflow_chain40_asgi", "chain of 40 fibo(10) nodes", lambda p: chain(p, 40), RUNS
    )


async def _runs(bench: Platform, slug: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        run = await run_service.create(bench.database, bench.owner, slug, {"x": float(i)})
        ids.append(run.id)
    return ids


async def _tick(database: Database, owner: Principal, run_id: str, cache: Any) -> int:
    async with database.write_session() as session:
        view = await run_service.tick(session, owner, run_id, cache)
    return view.revision


async def _statements(database: Database, owner: Principal, run_id: str, cache: Any) -> int:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        await _tick(database, owner, run_id, cache)
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
    return len(seen)


async def _create_workflow(bench: Platform, nodes: list[dict[str, Any]]) -> str:
    slug = f"bench-{uuid.uuid4().hex[:8]}"
    await workflow_service.create(
        bench.database,
        bench.owner,
        slug=slug,
        name=slug,
        graph={"nodes": nodes},
        visibility=None,
        organization_slug=None,
    )
    return slug


def tick_1000(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        async with platform(postgres=True, workers=False) as bench:
            # No workers: jobs stay queued, so "nothing changed" stays true between ticks.
            ticker = Database(bench.database.url)
            attach(ticker, Outbox(lambda message: None))
            cache = InProcessResultCache()
            pkg = bench.deployed.package_name
            try:
                big = await _create_workflow(bench, parallel_chains(pkg, 100, 10))
                small = await _create_workflow(bench, parallel_chains(pkg, 10, 10))
                run_ids = await _runs(bench, big, RUNS + 2)
                heap.settle()  # what the server's lifespan does (no lifespan here: no workers)
                submit: list[int] = []
                t0 = time.perf_counter()
                for run_id in run_ids[2:]:
                    start = time.perf_counter_ns()
                    await _tick(ticker, bench.owner, run_id, cache)
                    submit.append(time.perf_counter_ns() - start)
                submit_s = time.perf_counter() - t0
                idle: list[int] = []
                t0 = time.perf_counter()
                for _ in range(5):
                    for run_id in run_ids[2:]:
                        start = time.perf_counter_ns()
                        await _tick(ticker, bench.owner, run_id, cache)
                        idle.append(time.perf_counter_ns() - start)
                idle_s = time.perf_counter() - t0
                (small_run,) = await _runs(bench, small, 1)
                counts: dict[str, object] = {
                    "statements_submit_1000": await _statements(
                        ticker, bench.owner, run_ids[0], cache
                    ),
                    "statements_idle_1000": await _statements(
                        ticker, bench.owner, run_ids[0], cache
                    ),
                    "statements_submit_100": await _statements(
                        ticker, bench.owner, small_run, cache
                    ),
                    "statements_idle_100": await _statements(ticker, bench.owner, small_run, cache),
                }
            finally:
                await ticker.dispose()
            setup = "service call, one commit, memo hit, no-op send, PostgreSQL"
            return [
                summarise(
                    "workflow_tick_1000_service_memo_nosend",
                    "1,000 nodes, nothing changed",
                    setup,
                    idle,
                    idle_s,
                    extra=counts,
                ),
                summarise(
                    "workflow_tick_1000_service_memo_nosend",
                    "1,000 nodes, submits 100",
                    setup,
                    submit,
                    submit_s,
                    extra=counts,
                ),
            ]

    return asyncio.run(run())


QUERY = """
query Run($id: ID!) {
  workflowRun(id: $id) {
    id status revision
    workflowVersion { id version }
    nodeStates {
      nodeKey status attempt startedAt
      job { id status logs startedAt finishedAt }
      functionVersion { id version }
    }
  }
}
"""


def graphql_run_1000(options: Options) -> list[Result]:
    async def run() -> Result:
        async with platform(postgres=True, workers=False) as bench:
            ticker = Database(bench.database.url)
            attach(ticker, Outbox(lambda message: None))
            try:
                slug = await _create_workflow(
                    bench, parallel_chains(bench.deployed.package_name, 100, 10)
                )
                (run_id,) = await _runs(bench, slug, 1)
                await _tick(ticker, bench.owner, run_id, InProcessResultCache())  # 100 jobs
            finally:
                await ticker.dispose()
            body = {"query": QUERY, "variables": {"id": run_id}}

            async def query() -> None:
                response = await bench.client.post("/graphql", json=body, headers=bench.headers)
                data = response.json()
                if "errors" in data or len(data["data"]["workflowRun"]["nodeStates"]) != 1000:
                    raise RuntimeError(f"query failed: {str(data)[:300]}")

            for _ in range(3):
                await query()
            heap.settle()  # what the server's lifespan does (no lifespan here: no workers)
            latencies: list[int] = []
            t0 = time.perf_counter()
            for _ in range(50):
                start = time.perf_counter_ns()
                await query()
                latencies.append(time.perf_counter_ns() - start)
            return summarise(
                "workflow_graphql_asgi_1000_nodes_100_jobs",
                "nested run query, 1,000 nodes",
                "ASGI in-process, token checked, PostgreSQL",
                latencies,
                time.perf_counter() - t0,
            )

    return [asyncio.run(run())]


BENCHMARKS = {
    "workflow_diamond_asgi": diamond_run,
    "workflow_chain40_asgi": chain40,
    "workflow_tick_1000_service_memo_nosend": tick_1000,
    "workflow_graphql_asgi_1000_nodes_100_jobs": graphql_run_1000,
}
