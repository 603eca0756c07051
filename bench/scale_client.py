"""What the scale benchmarks drive: a real `calcgraph serve` (uvicorn, its own process) reached
over loopback HTTP with real RS256 tokens, and that process's CPU time and memory from /proc.

The tokens come from the tests' identity provider (the server validates them through its JWKS
like any other issuer's); the bench package is published over HTTP like a user's.
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
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
import httpx

from bench.bench_workflows import CODE, FUNCTIONS, diamond, parallel_chains
from bench.server import Server, serve
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import _reset_postgres

POSTGRES_URL = os.environ.get(
    "CALCGRAPH_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/cg_scale_bench"
)
TERMINAL = ("completed", "failed", "cancelled")
SLEEPY = "import time\n\ndef sleepy(x):\n    time.sleep(600)\n    return {'y': x}\n"
NAP_S = 20
"""How long `nap` takes: a long job (a run page waits tens of seconds for its next event)."""
NAP = f"\ndef nap(x):\n    time.sleep({NAP_S})\n    return {{'y': x}}\n"
SCALE_FUNCTIONS = {
    **FUNCTIONS,
    "sleepy": {
        "handler": "main:sleepy",
        "inputs": {"x": {"type": "Float", "required": True}},
        "outputs": {"y": {"type": "Float"}},
    },
    "nap": {
        "handler": "main:nap",
        "inputs": {"x": {"type": "Float", "required": True}},
        "outputs": {"y": {"type": "Float"}},
    },
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (its threads included, its children not)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ticks(path: str) -> tuple[int, int]:
    """(ppid, utime + stime in clock ticks) from a /proc stat file."""
    with open(path) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def _seconds(ticks: float) -> float:
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSplit:
    """Where CPU went, in seconds since the process start (subtract two to get a phase): the
    server's event loop thread (HTTP, auth, ticks), its other threads (the in-process workers:
    their loop, the Dramatiq threads, sweeper, heartbeat), its sandboxes (the jobs, in child
    processes), the PostgreSQL backends serving the bench database, this load generator, and
    the whole machine's busy time (everyone, other users included)."""

    loop_thread: float
    worker_threads: float
    sandboxes: float
    postgres: float
    client: float
    machine_busy: float
    redis: float = 0.0
    """The Redis server (shared by every Redis user of the machine; 0 when none runs)."""
    worker_process: float = 0.0
    """The `calcgraph worker` process alone (part of `worker_threads`; 0 without one)."""

    def __sub__(self, other: CpuSplit) -> CpuSplit:
        return CpuSplit(
            *(round(a - b, 2) for a, b in zip(self.values(), other.values(), strict=True))
        )

    def values(self) -> tuple[float, ...]:
        return (
            self.loop_thread,
            self.worker_threads,
            self.sandboxes,
            self.postgres,
            self.client,
            self.machine_busy,
            self.redis,
            self.worker_process,
        )

    @property
    def ours(self) -> float:
        """What the benchmark's own parts used: API processes, worker, sandboxes, PostgreSQL
        backends of its database, Redis, this load generator (others' work left out)."""
        return round(
            self.loop_thread
            + self.worker_threads
            + self.sandboxes
            + self.postgres
            + self.client
            + self.redis,
            2,
        )


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                parents.setdefault(_ticks(f"/proc/{entry}/stat")[0], []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_seconds(pid: int) -> float:
    """CPU seconds of process `pid` and its live descendants (threads included)."""
    total = 0.0
    for one in (pid, *_descendants(pid)):
        with contextlib.suppress(OSError):  # a process that just ended
            total += cpu_seconds(one)
    return total


def _reaped(pid: int) -> float:
    """CPU of the children `pid` waited for (cutime + cstime)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return _seconds(int(fields[13]) + int(fields[14]))


def _machine_busy() -> float:
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return _seconds(sum(fields[:8]) - idle)


async def cpu_split(api: Api) -> CpuSplit:
    """With in-process workers: the server's main thread, its other threads, its children.
    With `calcgraph serve --workers N` and `calcgraph worker`: the API processes' main threads
    (each its event loop), their other threads with the worker process's, and the worker's
    children (the sandboxes)."""
    loop = total = sandboxes = 0.0
    for pid in api.server.api_pids():
        with contextlib.suppress(OSError):
            loop += _seconds(_ticks(f"/proc/{pid}/task/{pid}/stat")[1])
            total += cpu_seconds(pid)
    job_pids = [api.pid] if api.worker_pid is None else [api.worker_pid]
    worker = 0.0
    if api.worker_pid is not None:
        with contextlib.suppress(OSError):
            worker = cpu_seconds(api.worker_pid)
            total += worker
    for pid in job_pids:
        with contextlib.suppress(OSError):
            sandboxes += _reaped(pid)
        for child in _descendants(pid):
            with contextlib.suppress(OSError):
                sandboxes += _seconds(_ticks(f"/proc/{child}/stat")[1])
    postgres = 0.0
    for backend in await api.postgres_backends():
        with contextlib.suppress(OSError):
            postgres += _seconds(_ticks(f"/proc/{backend}/stat")[1])
    client = sum(os.times()[:2])
    redis = sum(cpu_seconds(pid) for pid in _redis_servers())
    return CpuSplit(loop, total - loop, sandboxes, postgres, client, _machine_busy(), redis, worker)


def _redis_servers() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() == "redis-server":
                        found.append(int(entry))
    return found


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load1() -> float:
    return round(os.getloadavg()[0], 2)


TOKEN_REFRESH_S = 60.0


class Unavailable(RuntimeError):
    """503 Unavailable: the server asks to retry after `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"503 Unavailable, retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Api:
    server: Server
    http: httpx.AsyncClient
    idp: LocalIdentityProvider
    package: str
    setup: str
    postgres: bool = True
    worker_pid: int | None = None
    postgres_url: str = POSTGRES_URL
    """The server's database (when `postgres`)."""
    """The `calcgraph worker` process running the jobs, when the server sends them to Redis."""
    _headers: tuple[float, dict[str, str]] | None = None

    _users: dict[str, tuple[float, dict[str, str]]] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        """alice's bearer token, renewed every minute: the identity provider's tokens live
        5 minutes, and three 10,000-node runs on a busy machine take longer."""
        now = time.monotonic()
        if self._headers is None or now - self._headers[0] > TOKEN_REFRESH_S:
            self._headers = (now, self.idp.headers("alice"))
        return self._headers[1]

    def headers_of(self, user: str | None) -> dict[str, str]:
        """`user`'s bearer token (alice's when None), renewed every minute."""
        if user is None:
            return self.headers
        now = time.monotonic()
        held = self._users.get(user)
        if held is None or now - held[0] > TOKEN_REFRESH_S:
            held = self._users[user] = (now, self.idp.headers(user))
        return held[1]

    @property
    def pid(self) -> int:
        return self.server.pid

    async def workflow(self, nodes: list[dict[str, Any]]) -> str:
        slug = f"scale-{uuid.uuid4().hex[:8]}"
        # Public: every signed-in user may run it (the multi-user benchmarks).
        body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}, "visibility": "public"}
        response = await self.http.post("/workflows", json=body, headers=self.headers)
        if response.status_code != 201:
            raise RuntimeError(f"workflow refused: {response.status_code} {response.text[:300]}")
        return slug

    async def start(self, slug: str, x: float, user: str | None = None) -> str:
        response = await self.http.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=self.headers_of(user)
        )
        if response.status_code != 201:
            raise RuntimeError(f"run refused: {response.status_code} {response.text[:300]}")
        return str(response.json()["id"])

    async def tick(
        self, run_id: str, wait: float = 0.0, http: httpx.AsyncClient | None = None
    ) -> tuple[dict[str, Any], int]:
        """The run after one tick (through `http` if given), and the answer's size in bytes."""
        params = {"wait": wait} if wait else None
        response = await (http or self.http).post(
            f"/workflow-runs/{run_id}/tick", params=params, headers=self.headers
        )
        if response.status_code == 503:
            raise Unavailable(float(response.headers.get("Retry-After", "1")))
        if response.status_code != 200:
            raise RuntimeError(f"tick refused: {response.status_code} {response.text[:300]}")
        run: dict[str, Any] = response.json()
        return run, len(response.content)

    async def poll_tick(
        self, run_id: str, session: aiohttp.ClientSession, user: str | None = None
    ) -> dict[str, Any]:
        """The run after one plain tick as `user` (alice), through the aiohttp `session`."""
        headers = self.headers_of(user)
        async with session.post(f"/workflow-runs/{run_id}/tick", headers=headers) as answer:
            if answer.status == 503:
                raise Unavailable(float(answer.headers.get("Retry-After", "1")))
            if answer.status != 200:
                raise RuntimeError(f"tick refused: {answer.status} {(await answer.text())[:300]}")
            run: dict[str, Any] = await answer.json()
            return run

    async def graphql(self, query: str, **variables: Any) -> tuple[dict[str, Any], int]:
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables}, headers=self.headers
        )
        body: dict[str, Any] = response.json()
        if response.status_code != 200 or "errors" in body:
            raise RuntimeError(f"query failed: {str(body)[:300]}")
        return body["data"], len(response.content)

    async def postgres_backends(self) -> list[int]:
        """Process ids of the PostgreSQL backends connected to the bench database now."""
        if not self.postgres:
            return []
        url = self.postgres_url.replace("postgresql+asyncpg://", "postgresql://")
        connection = await asyncpg.connect(url)
        try:
            rows = await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        finally:
            await connection.close()
        return [int(row["pid"]) for row in rows]

    async def tick_seconds(self) -> tuple[float, float]:
        """(sum, count) of the server's tick duration histogram: time inside the tick's unit
        of work, as /metrics shows it."""
        text = (await self.http.get("/metrics")).text
        found = {"sum": 0.0, "count": 0.0}
        for line in text.splitlines():
            for part in found:
                if line.startswith(f"calcgraph_tick_duration_seconds_{part} "):
                    found[part] = float(line.split()[1])
        return found["sum"], found["count"]

    async def run_to_end(self, slug: str, x: float, limit_s: float) -> dict[str, Any]:
        """Long-poll ticks until terminal; the tick latencies and answer sizes with the run."""
        run_id = await self.start(slug, x)
        ticks: list[int] = []
        sizes: list[int] = []
        deadline = time.monotonic() + limit_s
        t0 = time.perf_counter()
        while True:
            start = time.perf_counter_ns()
            run, size = await self.tick(run_id, wait=5.0)
            ticks.append(time.perf_counter_ns() - start)
            sizes.append(size)
            if run["status"] in TERMINAL:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run_id} not done after {limit_s:.0f} s")
        if run["status"] != "completed":
            raise RuntimeError(f"run ended {run['status']}: {run.get('error_message')}")
        return {
            "id": run_id,
            "seconds": time.perf_counter() - t0,
            "ticks_ns": ticks,
            "sizes": sizes,
        }


@contextlib.asynccontextmanager
async def api(
    *,
    postgres: bool = True,
    threads: int = 4,
    connections: int = 100,
    redis: tuple[str, str] | None = None,
    workers: int = 1,
    job_worker: bool = False,
    postgres_url: str = POSTGRES_URL,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[Api]:
    """A fresh server (PostgreSQL unless told, in-process workers, process sandbox) with the
    bench package published by alice. `redis`: (url, key prefix) to send jobs through Redis
    instead (the server then runs no workers: what it sends waits in Redis, unless
    `job_worker`: one `calcgraph worker` process of `threads` threads runs them). `workers`:
    `calcgraph serve --workers N` (N > 1 needs `redis`), as an operator runs it. `postgres_url`:
    another database, so that two servers can run side by side; `extra_env`: more settings."""
    if workers > 1 and redis is None:
        raise ValueError("calcgraph serve --workers N > 1 needs Redis")
    idp = LocalIdentityProvider().start()
    env = {
        "CALCGRAPH_OIDC_ISSUER": idp.issuer,
        "CALCGRAPH_SANDBOX": "process",
        "CALCGRAPH_INPROCESS_WORKER_THREADS": str(threads),
        **(extra_env or {}),
    }
    broker = f"in-process broker, {threads} worker threads"
    if redis is not None:
        env |= {"CALCGRAPH_REDIS_URL": redis[0], "CALCGRAPH_REDIS_KEY_PREFIX": redis[1]}
        broker = "Redis broker, no worker"
        if job_worker:
            broker = f"Redis broker, one `calcgraph worker` ({threads} threads)"
    database = "SQLite"
    if postgres:
        await _reset_postgres(postgres_url)
        env["CALCGRAPH_DATABASE_URL"] = postgres_url
        database = "PostgreSQL"
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    try:
        with serve(workers=workers, extra_env=env) as server:
            setup = (
                f"HTTP through uvicorn ({server.command}), RS256 token, {database}, "
                f"{broker}, process sandbox"
            )
            async with (
                _job_worker(env, threads) if job_worker else _no_worker() as worker_pid,
                httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=120.0) as http,
            ):
                headers = idp.headers("alice")
                package = f"scale-{uuid.uuid4().hex[:8]}"
                body = {
                    "manifest": {
                        "kind": "package",
                        "version": 1,
                        "package": {
                            "name": package,
                            "version": "1.0.0",
                            "versioning_strategy": "auto",
                        },
                        "functions": SCALE_FUNCTIONS,
                    },
                    "files": {"main.py": CODE + "\n" + SLEEPY + NAP},
                    "visibility": "public",
                }
                published = await http.post("/packages", json=body, headers=headers)
                if published.status_code != 201:
                    raise RuntimeError(f"publish failed: {published.text[:300]}")
                yield Api(server, http, idp, package, setup, postgres, worker_pid, postgres_url)
    finally:
        idp.stop()


@contextlib.asynccontextmanager
async def _no_worker() -> AsyncIterator[int | None]:
    yield None


@contextlib.asynccontextmanager
async def _job_worker(env: dict[str, str], threads: int) -> AsyncIterator[int | None]:
    """One `calcgraph worker` process against the server's database and Redis."""
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-worker-") as tmp:
        worker_env = {
            **os.environ,
            **env,
            "CALCGRAPH_LOG_LEVEL": "warning",
            "CALCGRAPH_CODE_CACHE_DIR": os.path.join(tmp, "code"),
        }
        argv = [sys.executable, "-m", "calcgraph", "worker", "--processes", "1"]
        process = subprocess.Popen(  # noqa: ASYNC220 (once, before anything is measured)
            [*argv, "--threads", str(threads)],
            env=worker_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield process.pid
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@contextlib.asynccontextmanager
async def poller_client(api: Api, connections: int) -> AsyncIterator[aiohttp.ClientSession]:
    """The HTTP client of hundreds of pollers: aiohttp, whose client spends a fraction of
    httpx's CPU per request. The load generator shares the machine's two cores with the server
    it measures; with httpx it used 18-19 s of CPU against the event loop's 24-26 s at 500
    polled runs, and what it takes the server cannot use."""
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120.0)
    async with aiohttp.ClientSession(
        base_url=api.server.base_url, connector=connector, timeout=timeout
    ) as session:
        yield session


def diamond_nodes(api: Api) -> list[dict[str, Any]]:
    return diamond(api.package)


def chains_nodes(api: Api, nodes: int) -> list[dict[str, Any]]:
    """`nodes` function nodes as parallel chains: 10 of 10 for 100, else 100 chains."""
    chains = 10 if nodes <= 100 else 100
    return parallel_chains(api.package, chains, nodes // chains)


async def gather_limited(limit: int, *coroutines: Any) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> Any:
        async with gate:
            return await coroutine

    return list(await asyncio.gather(*(one(c) for c in coroutines)))
