"""The tick and a run's storage at scale (issue 14, goals 1, 2 and 4), on PostgreSQL.

- `scale_run_10000_inprocess`: a run of 10,000 nodes (100 chains of 100 trivial functions),
  created and ticked through the REST door (ASGI, `?wait=5&since=<revision>`), in-process
  workers (4 threads), process sandbox: on fresh tables (no statistics), then again after
  ANALYZE of tables holding the first run. Target: each ≤ 30 s (issue 24: ≤ 20 s after
  ANALYZE). Beside each run its CPU (`cpu_s_per_run`): this process and every process it started
  (workers, sandboxes) and the PostgreSQL backends serving the database.
- `scale_run_10000_redis`: the same through Redis and one `calcgraph worker` process.
- `scale_tick_idle_cold`: an idle tick (nothing finished since the last) of a run of 1,000 and
  of 10,000 nodes that is not in the process's memo (a fresh memo before each tick), the
  service call with its commit: answering every node state (what the specification's tick
  answers), and answering `since` the run's revision (`?since=N`). Target: ≤ 10 ms cold.
- `scale_tick_submit_redis_http`: a tick that submits 100 and 1,000 jobs, end to end: real
  HTTP through uvicorn (`calcgraph serve`, its own process), a real RS256 token, PostgreSQL,
  the real Redis send (pipelined, in a thread, after the commit); timed until the answer
  (p50/p99) and until every message is in Redis (`sent_*`), with the server's CPU per tick
  and what a `/health` sent meanwhile waits (the event loop's stall); on the fresh tables,
  then after ANALYZE. Target: 1,000 ≤ 150 ms.
- `scale_tick_plans`: EXPLAIN ANALYZE of every hot statement of the tick and of chain recording
  on a 10,000-node run (`tests/runs/plans.py`), fresh and analyzed, written to
  `bench/results/tick_plans_10000.txt`.

Every figure carries the load average (1, 5, 15 min) at its end: the machine is shared.
PostgreSQL: `CALCGRAPH_BENCH_POSTGRES_URL` (default .../cg_scale_tick_bench, reset at start);
Redis: `CALCGRAPH_BENCH_REDIS_URL` (default redis://127.0.0.1:6379/12, a fresh key prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import redis
from sqlalchemy import text

from bench.bench_workflows import parallel_chains
from bench.core import Options, Result, summarise
from bench.scale_client import POSTGRES_URL as SERVED_URL
from bench.scale_client import Api, api, cpu_seconds, tree_seconds
from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.service import run_service
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from calcgraph.workers.result_cache import InProcessResultCache
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import _reset_postgres
from tests.execution.factories import deploy
from tests.runs import plans

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_BENCH_POSTGRES_URL",
    "postgresql+asyncpg://postgres@127.0.0.1:5432/cg_scale_tick_bench",
)
REDIS_URL = os.environ.get("CALCGRAPH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
PLANS = Path(__file__).resolve().parent / "results" / "tick_plans_10000.txt"
CODE = """
def inc(x):
    return {"y": x + 1}
"""
FUNCTIONS = {
    "inc": {
        "handler": "main:inc",
        "inputs": {"x": {"type": "Float", "required": True}},
        "outputs": {"y": {"type": "Float"}},
    }
}
TERMINAL = ("completed", "failed", "cancelled")


def load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


def chains_graph(pkg: str, chains: int, length: int) -> list[dict[str, Any]]:
    def fn(key: str, source: str | None) -> dict[str, Any]:
        binding = (
            {"source": "input_node", "input_key": "x", "from_port": "value"}
            if source is None
            else {"source": "edge", "from_node_key": source, "from_port": "y"}
        )
        return {
            "node_key": key,
            "kind": "function",
            "function": f"{pkg}/inc",
            "input_bindings": {"x": binding},
        }

    nodes: list[dict[str, Any]] = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}
    ]
    for c in range(chains):
        nodes += [fn(f"c{c}n{i}", None if i == 0 else f"c{c}n{i - 1}") for i in range(length)]
    return nodes


class Bench:
    def __init__(
        self, client: httpx.AsyncClient, database: Database, headers: dict[str, str], pkg: str
    ) -> None:
        self.client, self.database, self.headers, self.pkg = client, database, headers, pkg
        self.owner: Principal | None = None

    async def workflow(self, chains: int, length: int) -> str:
        slug = f"scale-{uuid.uuid4().hex[:8]}"
        body = {
            "slug": slug,
            "name": slug,
            "graph": {"nodes": chains_graph(self.pkg, chains, length)},
        }
        response = await self.client.post("/workflows", json=body, headers=self.headers)
        if response.status_code != 201:
            raise RuntimeError(f"workflow refused: {response.text[:2000]}")
        return slug

    async def start(self, slug: str, x: float = 1.0) -> dict[str, Any]:
        created = await self.client.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=self.headers
        )
        if created.status_code != 201:
            raise RuntimeError(f"run refused: {created.text[:2000]}")
        run: dict[str, Any] = created.json()
        return run

    async def tick(self, run_id: str, **params: Any) -> dict[str, Any]:
        response = await self.client.post(
            f"/workflow-runs/{run_id}/tick", params=params, headers=self.headers, timeout=120
        )
        if response.status_code != 200:
            raise RuntimeError(f"tick refused: {response.text[:2000]}")
        body: dict[str, Any] = response.json()
        return body

    async def run_to_end(self, slug: str, x: float) -> tuple[float, int]:
        """Seconds from creation to completion, and the ticks it took (long-polled, `since`).
        A new `x` for each run: no node's result is in the result cache."""
        began = time.perf_counter()
        run = await self.start(slug, x)
        revision, ticks = run["revision"], 0
        while run["status"] not in TERMINAL:
            run = await self.tick(run["id"], wait=5, since=revision)
            revision, ticks = run["revision"], ticks + 1
        seconds = time.perf_counter() - began
        if run["status"] != "completed":
            raise RuntimeError(f"run ended {run['status']}: {run['error_message']}")
        return seconds, ticks


async def _fresh_database() -> str:
    await _reset_postgres(POSTGRES_URL)
    migrator = Database(POSTGRES_URL)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    return POSTGRES_URL


@contextlib.asynccontextmanager
async def platform(*, workers: bool = True, **overrides: Any) -> AsyncIterator[Bench]:
    idp = LocalIdentityProvider().start()
    tmp = Path(tempfile.mkdtemp(prefix="calcgraph-bench-scale-"))
    url = await _fresh_database()
    settings = Settings(
        _env_file=None,
        database_url=url,
        oidc_issuer=idp.issuer,
        code_cache_dir=tmp / "code",
        inprocess_worker_threads=4,
        sandbox="process",
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
                bench = Bench(client, database, idp.headers("alice"), deployed.package_name)
                bench.owner = owner
                yield bench
    finally:
        if not workers:
            await app.state.execution.close()
        await database.dispose()
        idp.stop()


async def _analyze(database: Database) -> None:
    async with database.write_session() as session:
        await session.execute(text("ANALYZE"))


async def _spent(database: Database) -> float:
    """CPU seconds so far of this process and every process it started (in-process workers,
    a `calcgraph worker`, sandboxes) and of the PostgreSQL backends serving its database."""
    async with database.read_session() as session:
        rows = await session.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend'"
            )
        )
        backends = [int(pid) for (pid,) in rows]
    total = tree_seconds(os.getpid())
    for pid in backends:
        with contextlib.suppress(OSError):  # a backend that just ended
            total += cpu_seconds(pid)
    return total


def _run_result(
    name: str, setup: str, scenario: str, seconds: float, ticks: int, cpu_s: float
) -> Result:
    return Result(
        benchmark=name,
        scenario=scenario,
        setup=setup,
        requests=ticks,
        seconds=round(seconds, 2),
        rps=ticks / seconds,
        p50_us=seconds * 1e6,
        p99_us=seconds * 1e6,
        extra={
            "run_seconds": round(seconds, 2),
            "ticks": ticks,
            "cpu_s_per_run": round(cpu_s, 2),
            "load": load(),
        },
    )


async def _two_runs(bench: Bench, name: str, setup: str) -> list[Result]:
    slug = await bench.workflow(100, 100)
    results = []
    for scenario, x in (("10,000 nodes, fresh tables", 1.0), ("10,000 nodes, after ANALYZE", 1e3)):
        if x > 1.0:
            await _analyze(bench.database)
        before = await _spent(bench.database)
        seconds, ticks = await bench.run_to_end(slug, x)
        cpu_s = await _spent(bench.database) - before
        results.append(_run_result(name, setup, scenario, seconds, ticks, cpu_s))
    return results


def run_10000_inprocess(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        async with platform() as bench:
            setup = "REST via ASGI, in-process workers (4 threads), process sandbox, PostgreSQL"
            return await _two_runs(bench, "scale_run_10000_inprocess", setup)

    return asyncio.run(run())


@contextlib.contextmanager
def redis_prefix() -> Any:
    redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()


def run_10000_redis(options: Options) -> list[Result]:
    async def run(prefix: str) -> list[Result]:
        tmp = Path(tempfile.mkdtemp(prefix="calcgraph-bench-worker-"))
        async with platform(redis_url=REDIS_URL, redis_key_prefix=prefix) as bench:
            env = {
                **os.environ,
                "CALCGRAPH_DATABASE_URL": POSTGRES_URL,
                "CALCGRAPH_REDIS_URL": REDIS_URL,
                "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
                "CALCGRAPH_SANDBOX": "process",
                "CALCGRAPH_CODE_CACHE_DIR": str(tmp / "code"),
            }
            worker = subprocess.Popen(  # noqa: ASYNC220 (once, before anything is measured)
                [sys.executable, "-m", "calcgraph", "worker", "--processes", "1"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                setup = "REST via ASGI, Redis, one `calcgraph worker` (8 threads), process sandbox"
                return await _two_runs(bench, "scale_run_10000_redis", setup)
            finally:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()

    with redis_prefix() as prefix:
        return asyncio.run(run(prefix))


async def _idle_cold(
    bench: Bench, chains: int, length: int, since: bool
) -> tuple[list[int], list[float]]:
    """Idle ticks of one run (submitted once, no workers: nothing ever finishes), each on a
    fresh memo: the run is not in this process's memory."""
    run = await bench.start(await bench.workflow(chains, length))
    first = await bench.tick(run["id"])
    assert bench.owner is not None
    cache = InProcessResultCache()
    latencies, cpu = [], []
    for _ in range(30):
        run_service.memo = RunMemo()
        began, cpu_began = time.perf_counter_ns(), time.process_time()
        async with bench.database.write_session() as session:
            await run_service.tick(
                session,
                bench.owner,
                run["id"],
                cache,
                chains=True,
                since=first["revision"] if since else None,
            )
        latencies.append(time.perf_counter_ns() - began)
        cpu.append(time.process_time() - cpu_began)
    return latencies, sorted(cpu)


def tick_idle_cold(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        results = []
        async with platform(workers=False) as bench:
            for chains, length in ((10, 100), (100, 100)):
                nodes = chains * length
                for since in (False, True):
                    began = time.perf_counter()
                    latencies, cpu = await _idle_cold(bench, chains, length, since)
                    answer = "changed states (since)" if since else "every node state"
                    results.append(
                        summarise(
                            "scale_tick_idle_cold",
                            f"{nodes:,} nodes, not in memo, answers {answer}",
                            "service call, one commit, PostgreSQL",
                            latencies,
                            time.perf_counter() - began,
                            extra={
                                "api_cpu_p50_ms": round(cpu[len(cpu) // 2] * 1000, 2),
                                "load": load(),
                            },
                        )
                    )
        return results

    return asyncio.run(run())


async def _sent(client: Any, key: str, count: int, limit_s: float = 30.0) -> None:
    """Until the broker's message hash holds `count` messages (or `limit_s` passes)."""
    deadline = time.monotonic() + limit_s
    while await client.hlen(key) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count - await client.hlen(key)} messages never reached Redis")
        await asyncio.sleep(0.001)


async def _probe(http: httpx.AsyncClient, stop: asyncio.Event, latencies: list[int]) -> None:
    """`GET /health` on a connection of its own, every 2 ms until `stop`: what a request
    waits while the server is busy with a tick and its send."""
    while not stop.is_set():
        began = time.perf_counter_ns()
        await http.get("/health")
        latencies.append(time.perf_counter_ns() - began)
        await asyncio.sleep(0.002)


@dataclass
class _Submitted:
    answered_ns: int
    sent_ns: int
    server_cpu_s: float
    database_cpu_s: float


async def _database_cpu(connection: Any) -> float:
    """CPU seconds of the PostgreSQL backends serving this database's clients (but this
    connection's): the server's pooled connections, on this machine; not autovacuum's."""
    pids = await connection.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    total = 0.0
    for (pid,) in pids:
        with contextlib.suppress(OSError):  # a backend that just ended
            total += cpu_seconds(pid)
    return total


async def _submit_tick(
    bench: Api,
    queue: Any,
    key: str,
    pg: Any,
    slug: str,
    width: int,
    x: float,
    stalls: list[int] | None,
) -> _Submitted:
    """One run's first tick, which submits `width` jobs; with `stalls`, probed meanwhile."""
    run_id = await bench.start(slug, x)
    before = await queue.hlen(key)
    cpu_before, db_before = cpu_seconds(bench.pid), await _database_cpu(pg)
    stop = asyncio.Event()
    probe = None
    if stalls is not None:
        prober = httpx.AsyncClient(base_url=bench.server.base_url)
        await prober.get("/health")  # its connection open before the tick
        probe = asyncio.create_task(_probe(prober, stop, stalls))
    start = time.perf_counter_ns()
    body, _ = await bench.tick(run_id)
    answered = time.perf_counter_ns() - start
    await _sent(queue, key, before + width)
    sent = time.perf_counter_ns() - start
    if probe is not None:
        stop.set()
        await probe
        await prober.aclose()
    running = sum(s["status"] == "running" for s in body["node_states"].values())
    if running != width:
        raise RuntimeError(f"the tick started {running} of {width} nodes")
    return _Submitted(
        answered, sent, cpu_seconds(bench.pid) - cpu_before, await _database_cpu(pg) - db_before
    )


def tick_submit_redis_http(options: Options) -> list[Result]:
    """A tick that submits 100 and 1,000 jobs as a user's client sees it: the tick over HTTP
    (uvicorn, RS256 token, PostgreSQL, full answer) until its answer, and until its messages
    are in Redis (the broker's message hash holds them all); the CPU per tick of the server
    (its send thread included) and of PostgreSQL's backends; and, in a second pass, what a
    `/health` sent every 2 ms meanwhile waits (the event loop is free when it is about 1 ms).

    Twice: on the fresh database's tables, then after ANALYZE (what autovacuum does to a
    database within about a minute). The submitted nodes' UPDATE is planned for its
    parameters every time: a generic plan PostgreSQL cached while the tables were tiny (the
    100-job ticks come first) probed an index by the run alone until an ANALYZE (about 500
    rows per node, 37-89 ms instead of 7-15 ms). After the ANALYZE the job INSERT's
    foreign-key check of each row reads the bench's small `workflow_runs` table whole (a
    sequential scan per row, with the dead rows of earlier runs): about 6 ms more per tick."""

    async def run(prefix: str) -> list[Result]:
        from redis import asyncio as aioredis

        from calcgraph.workers.broker import QUEUE

        results = []
        key = f"{prefix}calcgraph:{QUEUE}.msgs"
        queue = aioredis.Redis.from_url(REDIS_URL)
        x = 0.0  # a fresh input for every run: no result-cache hits, every job is sent
        async with api(redis=(REDIS_URL, prefix)) as bench:
            # After api(): it creates the database when missing.
            pg = await asyncpg.connect(SERVED_URL.replace("+asyncpg", ""))
            try:
                slugs = {
                    width: await bench.workflow(parallel_chains(bench.package, width, 1))
                    for width in (100, 1000)
                }
                for analyzed in (False, True):
                    if analyzed:
                        await pg.execute("ANALYZE")
                    for width, slug in slugs.items():
                        began = time.perf_counter()
                        timed: list[_Submitted] = []
                        stalls: list[int] = []
                        for i in range(2 + 20 + 5):  # 2 to warm up, 20 timed, 5 probed
                            x += 1.0
                            probed = stalls if i >= 22 else None
                            one = await _submit_tick(bench, queue, key, pg, slug, width, x, probed)
                            if 2 <= i < 22:
                                timed.append(one)
                        seconds = time.perf_counter() - began
                        sent = sorted(t.sent_ns for t in timed)
                        cpu = sorted(t.server_cpu_s for t in timed)
                        db_cpu = sorted(t.database_cpu_s for t in timed)
                        stalls.sort()
                        extra = {
                            "sent_p50_ms": round(sent[len(sent) // 2] / 1e6, 1),
                            "sent_max_ms": round(sent[-1] / 1e6, 1),
                            "server_cpu_p50_ms": round(cpu[len(cpu) // 2] * 1000, 1),
                            "postgres_cpu_p50_ms": round(db_cpu[len(db_cpu) // 2] * 1000, 1),
                            "health_during_tick_p50_ms": round(stalls[len(stalls) // 2] / 1e6, 1),
                            "health_during_tick_max_ms": round(stalls[-1] / 1e6, 1),
                            "load": load(),
                        }
                        tables = "after ANALYZE" if analyzed else "fresh tables"
                        results.append(
                            summarise(
                                "scale_tick_submit_redis_http",
                                f"tick submits {width:,} jobs, {tables}, answered"
                                " (sent_*: in Redis)",
                                bench.setup + ", full answer",
                                [t.answered_ns for t in timed],
                                seconds,
                                extra=extra,
                            )
                        )
            finally:
                await queue.aclose()
                await pg.close()
        return results

    with redis_prefix() as prefix:
        return asyncio.run(run(prefix))


def tick_plans(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        url = await _fresh_database()
        database = Database(url)
        lines: list[str] = []
        began = time.perf_counter()
        try:
            for statistics in (False, True):
                async with database.write_session() as session:
                    for _ in range(3):
                        await plans.seed(session, 10, 100, done=100)
                    big = await plans.seed(session, 100, 100)
                    if statistics:
                        await session.execute(text("ANALYZE"))
                    title = "after ANALYZE" if statistics else "fresh tables, no statistics"
                    lines.append(f"=== 10,000-node run (100 chains of 100, half done), {title}")
                    for label, sql, plan in await plans.hot_statements(session, big):
                        lines += [f"--- {label}", sql.strip(), plans.describe(plan), ""]
                    await session.rollback()
        finally:
            await database.dispose()
        PLANS.parent.mkdir(parents=True, exist_ok=True)
        PLANS.write_text("\n".join(lines) + "\n")
        seconds = time.perf_counter() - began
        return [
            Result(
                "scale_tick_plans",
                f"EXPLAIN ANALYZE written to {PLANS.name}",
                "PostgreSQL",
                1,
                round(seconds, 2),
                1 / seconds,
                seconds * 1e6,
                seconds * 1e6,
                extra={"file": str(PLANS), "load": load()},
            )
        ]

    return asyncio.run(run())


BENCHMARKS = {
    "scale_run_10000_inprocess": run_10000_inprocess,
    "scale_run_10000_redis": run_10000_redis,
    "scale_tick_idle_cold": tick_idle_cold,
    "scale_tick_submit_redis_http": tick_submit_redis_http,
    "scale_tick_plans": tick_plans,
}
