"""Execution benchmarks: a trivial function (`add`) from execute request to result.

- `execution_warm_asgi_*`: warm sandbox, through the API in-process (ASGI, no socket; token checked,
  `wait` answered 200), the in-process broker or Redis with one `calcgraph worker` process.
- `execution_cold_asgi`: the same with the function version's warm sandbox discarded before
  each call.
- `execution_idle_start`: enqueue-to-start (message sent after commit -> job `started_at`) after
  the workers sat idle for 60 s, then one job a second.
- `execution_throughput_service`: jobs per second, submitted by calling the execute service
  (no HTTP, no token) with `wait=0`
  by 4 concurrent callers through the in-process broker (SQLite), by 16 through Redis to 2
  worker processes (PostgreSQL); p50/p99 there are submit-to-finish times.
- `execution_drain`: the workers alone: the same jobs written first, their messages then sent at
  once; jobs per second from the first send to the last finish (p50/p99: run times, start to
  finish).

Needs Redis at 127.0.0.1:6379 (database 12, own key prefix) and PostgreSQL for the Redis
throughput scenario (`CALCGRAPH_BENCH_POSTGRES_URL`, default .../cg_exec_bench); the tests'
identity provider and factories provide the token and the package rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
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

import httpx
from sqlalchemy import func, select
from starlette.applications import Starlette

from bench.core import Options, Result, summarise
from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.submission.service import job_submission_service
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from calcgraph.workers.broker import send
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.inprocess import Execution
from calcgraph.workers.sandbox import SandboxUnavailable, create_backend
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import _reset_postgres
from tests.execution.factories import Deployed, deploy

REDIS_URL = "redis://127.0.0.1:6379/12"
POSTGRES_URL = os.environ.get(
    "CALCGRAPH_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/cg_exec_bench"
)
IDLE_S = 60.0
IDLE_SAMPLES = 30
THROUGHPUT_JOBS = 1500
CONCURRENCY = 16


def _sandboxes() -> list[str]:
    found = []
    for kind in ("process", "bwrap", "docker"):
        try:
            backend = create_backend(Settings(_env_file=None), kind=kind)  # type: ignore[call-arg, arg-type]
            backend.enforcement()
            backend.close()
            found.append(kind)
        except (SandboxUnavailable, Exception):
            continue
    return found


@dataclass
class Bench:
    app: Starlette
    client: httpx.AsyncClient
    database: Database
    headers: dict[str, str]
    deployed: Deployed
    worker: subprocess.Popen[bytes] | None

    @property
    def execution(self) -> Execution:
        execution: Execution = self.app.state.execution
        return execution

    async def call(self, x: float) -> httpx.Response:
        response = await self.client.post(
            f"/packages/{self.deployed.package_name}/functions/add/execute",
            json={"inputs": {"x": x, "y": 1}},
            headers=self.headers,
        )
        if response.status_code != 200 or response.json()["status"] != "success":
            raise RuntimeError(f"execute failed: {response.status_code} {response.text}")
        return response


async def _database_url(postgres: bool, tmp: Path) -> str:
    if postgres:
        await _reset_postgres(POSTGRES_URL)
        url = POSTGRES_URL
    else:
        url = f"sqlite+aiosqlite:///{tmp / f'bench-{uuid.uuid4().hex[:6]}.db'}"
    migrator = Database(url)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    return url


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)


@contextlib.asynccontextmanager
async def platform(
    sandbox: str,
    *,
    redis: bool = False,
    processes: int = 1,
    threads: int = 4,
    postgres: bool = False,
) -> AsyncIterator[Bench]:
    idp = LocalIdentityProvider().start()
    tmp = Path(tempfile.mkdtemp(prefix="calcgraph-bench-"))
    url = await _database_url(postgres, tmp)
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    options: dict[str, Any] = {
        "database_url": url,
        "oidc_issuer": idp.issuer,
        "sandbox": sandbox,
        "code_cache_dir": tmp / "code",
        "inprocess_worker_threads": threads,
    }
    if redis:
        options.update(redis_url=REDIS_URL, redis_key_prefix=prefix)
    settings = Settings(_env_file=None, **options)  # type: ignore[call-arg]
    worker = None
    if redis:
        env = {
            **os.environ,
            "CALCGRAPH_DATABASE_URL": url,
            "CALCGRAPH_REDIS_URL": REDIS_URL,
            "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
            "CALCGRAPH_SANDBOX": sandbox,
            "CALCGRAPH_CODE_CACHE_DIR": str(tmp / "worker-code"),
        }
        command = [sys.executable, "-m", "calcgraph", "worker"]
        command += ["--processes", str(processes), "--threads", str(threads)]
        worker = _start(command, env)
    database = Database(url)
    app = create_app(settings, database)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                owner = await create_user(database, idp, "alice")
                deployed = await deploy(database, owner)
                bench = Bench(app, client, database, idp.headers("alice"), deployed, worker)
                await bench.call(-1.0)  # the first run of a fresh worker imports and stages
                yield bench
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
        await database.dispose()
        idp.stop()
        if redis:
            _drop_keys(prefix)
        shutil.rmtree(tmp, ignore_errors=True)


def _drop_keys(prefix: str) -> None:
    import redis as redis_client

    client = redis_client.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


async def _latencies(bench: Bench, count: int, max_s: float, cold: bool = False) -> list[int]:
    latencies: list[int] = []
    deadline = time.perf_counter() + max_s
    runtime = bench.execution.runtime
    for i in range(count):
        if cold and runtime is not None:
            runtime.pool.discard(bench.deployed.versions["add"])
        t0 = time.perf_counter_ns()
        await bench.call(float(i) + time.time() % 1)  # never the same inputs: no cache hits
        latencies.append(time.perf_counter_ns() - t0)
        if time.perf_counter() > deadline:
            break
    return latencies


def warm_inprocess(options: Options) -> list[Result]:
    async def run(sandbox: str) -> Result:
        async with platform(sandbox) as bench:
            await _latencies(bench, 30, 2.0)
            t0 = time.perf_counter()
            latencies = await _latencies(bench, 1000, options.inprocess_max_s)
            return summarise(
                "execution_warm_asgi_inprocess",
                f"trivial job, warm {sandbox}",
                "ASGI in-process, in-process broker, SQLite",
                latencies,
                time.perf_counter() - t0,
            )

    return [asyncio.run(run(sandbox)) for sandbox in _sandboxes()]


def warm_redis(options: Options) -> list[Result]:
    async def run(sandbox: str) -> Result:
        async with platform(sandbox, redis=True, threads=2) as bench:
            await _latencies(bench, 30, 2.0)
            t0 = time.perf_counter()
            latencies = await _latencies(bench, 1000, options.inprocess_max_s)
            return summarise(
                "execution_warm_asgi_redis",
                f"trivial job, warm {sandbox}",
                "ASGI in-process, Redis broker, 1 worker process, SQLite",
                latencies,
                time.perf_counter() - t0,
            )

    return [asyncio.run(run(sandbox)) for sandbox in _sandboxes()]


def cold(options: Options) -> list[Result]:
    async def run(sandbox: str) -> Result:
        async with platform(sandbox) as bench:
            count = 10 if sandbox == "docker" else 30
            t0 = time.perf_counter()
            latencies = await _latencies(bench, count, 30.0, cold=True)
            return summarise(
                "execution_cold_asgi",
                f"trivial job, new {sandbox} sandbox",
                "ASGI in-process, in-process broker, SQLite",
                latencies,
                time.perf_counter() - t0,
            )

    return [asyncio.run(run(sandbox)) for sandbox in _sandboxes()]


async def _submit(bench: Bench, database: Database, x: float) -> str:
    principal = await create_user(database, _IDP_FOR[id(bench)], "alice")
    async with database.write_session() as session:
        job = await job_submission_service.submit(
            session,
            principal,
            ExecuteAddress.by_path(bench.deployed.package_name, "add"),
            {"x": x, "y": 1},
            bench.execution.cache,
        )
    return job.id


_IDP_FOR: dict[int, LocalIdentityProvider] = {}


async def _enqueue_to_start(bench: Bench, samples: int, gap_s: float) -> list[int]:
    """Jobs written and committed here; the clock starts when the outbox sends the message."""
    sent_at: dict[str, float] = {}
    timed = Database(bench.database.url)
    current: list[str] = []

    def timed_send(message: Any) -> None:
        sent_at[str(message.kwargs["job_id"])] = time.time()
        send(bench.execution.broker, message)

    attach(timed, Outbox(timed_send))
    owner = await _principal(bench)
    latencies: list[int] = []
    try:
        for i in range(samples):
            async with timed.write_session() as session:
                job = await job_submission_service.submit(
                    session,
                    owner,
                    ExecuteAddress.by_path(bench.deployed.package_name, "add"),
                    {"x": 1e6 + i + time.time() % 1, "y": 1},
                    bench.execution.cache,
                )
            current.append(job.id)
            started = await _started_at(bench.database, job.id)
            latencies.append(int((started - sent_at[job.id]) * 1e9))
            await asyncio.sleep(gap_s)
    finally:
        await timed.dispose()
    return latencies


async def _principal(bench: Bench) -> Any:
    from calcgraph.domain.access.models import User
    from calcgraph.domain.access.principal import Principal

    async with bench.database.read_session() as session:
        user = await session.scalar(select(User).where(User.username == "alice"))
        assert user is not None
        return Principal(user.id, user.subject, user.username, frozenset({"user"}))


async def _started_at(database: Database, job_id: str) -> float:
    for _ in range(2000):
        async with database.read_session() as session:
            row = await session.get(Job, job_id)
            if row is not None and row.status in ("success", "failed"):
                assert row.started_at is not None
                return row.started_at.timestamp()
        await asyncio.sleep(0.005)
    raise RuntimeError(f"job {job_id} did not finish")


def idle_start(options: Options) -> list[Result]:
    sandbox = "bwrap" if "bwrap" in _sandboxes() else "process"

    async def run() -> list[Result]:
        async with platform(sandbox) as local, platform(sandbox, redis=True, threads=2) as remote:
            await asyncio.sleep(IDLE_S)
            results = []
            for name, bench in (("in-process broker", local), ("Redis broker", remote)):
                t0 = time.perf_counter()
                latencies = await _enqueue_to_start(bench, IDLE_SAMPLES, 1.0)
                results.append(
                    summarise(
                        "execution_idle_start",
                        f"enqueue to start after {IDLE_S:.0f} s idle, then 1 job/s",
                        f"{name}, {sandbox}, SQLite",
                        latencies,
                        time.perf_counter() - t0,
                    )
                )
            return results

    return asyncio.run(run())


async def _throughput(bench: Bench, jobs: int, concurrency: int) -> tuple[float, list[int]]:
    owner = await _principal(bench)
    address = ExecuteAddress.by_path(bench.deployed.package_name, "add")
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(jobs):
        queue.put_nowait(i)
    ids: list[str] = []
    salt = time.time()

    async def submitter() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            async with bench.database.write_session() as session:
                job = await job_submission_service.submit(
                    session, owner, address, {"x": salt + i, "y": 1}, bench.execution.cache
                )
            ids.append(job.id)

    await asyncio.gather(*(submitter() for _ in range(concurrency)))
    rows = await _finished(bench, ids)
    first = min(r[1] for r in rows)
    last = max(r[2] for r in rows)
    latencies = [int((r[2] - r[1]).total_seconds() * 1e9) for r in rows]
    return (last - first).total_seconds(), latencies


async def _drain(bench: Bench, jobs: int) -> tuple[float, list[int]]:
    """Workers alone: `jobs` rows written first (their messages held back), then every message
    sent at once; from the first send to the last `finished_at`."""
    owner = await _principal(bench)
    address = ExecuteAddress.by_path(bench.deployed.package_name, "add")
    held: list[Any] = []
    writer = Database(bench.database.url)
    attach(writer, Outbox(held.append))
    ids: list[str] = []
    salt = time.time()
    try:
        for i in range(jobs):
            async with writer.write_session() as session:
                job = await job_submission_service.submit(
                    session, owner, address, {"x": salt + i, "y": 1}, bench.execution.cache
                )
            ids.append(job.id)
    finally:
        await writer.dispose()
    started = time.time()
    for message in held:
        send(bench.execution.broker, message)
    rows = await _finished(bench, ids)
    last = max(r[2] for r in rows).timestamp()
    return last - started, [int((r[2] - r[3]).total_seconds() * 1e9) for r in rows]


async def _finished(bench: Bench, ids: list[str]) -> list[Any]:
    # Counting is cheap; the rows are read once, at the end (the measurement must not load
    # the machine it measures).
    while True:
        async with bench.database.read_session() as session:
            done = await session.scalar(
                select(func.count())
                .select_from(Job)
                .where(Job.id.in_(ids), Job.status.in_(("success", "failed")))
            )
        if done == len(ids):
            break
        await asyncio.sleep(0.1)
    async with bench.database.read_session() as session:
        rows = await session.execute(
            select(Job.status, Job.created_at, Job.finished_at, Job.started_at).where(
                Job.id.in_(ids)
            )
        )
        return list(rows)


def drain(options: Options) -> list[Result]:
    sandbox = "bwrap" if "bwrap" in _sandboxes() else "process"

    async def run(redis: bool) -> Result:
        setup = (
            "Redis broker, 2 worker processes x 4 threads, PostgreSQL"
            if redis
            else "in-process broker, 4 threads, SQLite"
        )
        setup = f"service call (no HTTP, no auth), {setup}"
        async with platform(sandbox, redis=redis, processes=2, threads=4, postgres=redis) as bench:
            if redis:
                await asyncio.gather(*(bench.call(-2.0 - i) for i in range(8)))  # warm both
            seconds, latencies = await _drain(bench, THROUGHPUT_JOBS)
            return summarise(
                "execution_drain",
                f"{THROUGHPUT_JOBS} queued trivial jobs sent at once, {sandbox}",
                setup,
                latencies,
                seconds,
            )

    return [asyncio.run(run(False)), asyncio.run(run(True))]


def throughput(options: Options) -> list[Result]:
    sandbox = "bwrap" if "bwrap" in _sandboxes() else "process"

    async def run(redis: bool) -> Result:
        setup = (
            "Redis broker, 2 worker processes x 4 threads, PostgreSQL"
            if redis
            else "in-process broker, 4 threads, SQLite"
        )
        setup = f"service call (no HTTP, no auth), {setup}"
        async with platform(sandbox, redis=redis, processes=2, threads=4, postgres=redis) as bench:
            if redis:
                await asyncio.gather(*(bench.call(-2.0 - i) for i in range(8)))  # warm both
            # SQLite takes one writer at a time: more submitters only queue on its lock.
            concurrency = CONCURRENCY if redis else 4
            seconds, latencies = await _throughput(bench, THROUGHPUT_JOBS, concurrency)
            result = summarise(
                "execution_throughput_service",
                f"{THROUGHPUT_JOBS} trivial jobs, {concurrency} submitters, {sandbox}",
                setup,
                latencies,
                seconds,
            )
            return result

    return [asyncio.run(run(False)), asyncio.run(run(True))]


BENCHMARKS = {
    "execution_warm_asgi_inprocess": warm_inprocess,
    "execution_warm_asgi_redis": warm_redis,
    "execution_cold_asgi": cold,
    "execution_idle_start": idle_start,
    "execution_throughput_service": throughput,
    "execution_drain": drain,
}
