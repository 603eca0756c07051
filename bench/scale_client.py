"""What the scale benchmarks drive: a real `calcgraph serve` (uvicorn, its own process) reached
over loopback HTTP with real RS256 tokens, and that process's CPU time and memory from /proc.

The tokens come from the tests' identity provider (the server validates them through its JWKS
like any other issuer's); the bench package is published over HTTP like a user's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

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
SCALE_FUNCTIONS = {
    **FUNCTIONS,
    "sleepy": {
        "handler": "main:sleepy",
        "inputs": {"x": {"type": "Float", "required": True}},
        "outputs": {"y": {"type": "Float"}},
    },
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (its threads included, its children not)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load1() -> float:
    return round(os.getloadavg()[0], 2)


TOKEN_REFRESH_S = 60.0


@dataclass
class Api:
    server: Server
    http: httpx.AsyncClient
    idp: LocalIdentityProvider
    package: str
    setup: str
    _headers: tuple[float, dict[str, str]] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """alice's bearer token, renewed every minute: the identity provider's tokens live
        5 minutes, and three 10,000-node runs on a busy machine take longer."""
        now = time.monotonic()
        if self._headers is None or now - self._headers[0] > TOKEN_REFRESH_S:
            self._headers = (now, self.idp.headers("alice"))
        return self._headers[1]

    @property
    def pid(self) -> int:
        return self.server.pid

    async def workflow(self, nodes: list[dict[str, Any]]) -> str:
        slug = f"scale-{uuid.uuid4().hex[:8]}"
        body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
        response = await self.http.post("/workflows", json=body, headers=self.headers)
        if response.status_code != 201:
            raise RuntimeError(f"workflow refused: {response.status_code} {response.text[:300]}")
        return slug

    async def start(self, slug: str, x: float) -> str:
        response = await self.http.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=self.headers
        )
        if response.status_code != 201:
            raise RuntimeError(f"run refused: {response.status_code} {response.text[:300]}")
        return str(response.json()["id"])

    async def tick(self, run_id: str, wait: float = 0.0) -> tuple[dict[str, Any], int]:
        """The run after one tick, and the size of the answer in bytes."""
        params = {"wait": wait} if wait else None
        response = await self.http.post(
            f"/workflow-runs/{run_id}/tick", params=params, headers=self.headers
        )
        if response.status_code != 200:
            raise RuntimeError(f"tick refused: {response.status_code} {response.text[:300]}")
        run: dict[str, Any] = response.json()
        return run, len(response.content)

    async def graphql(self, query: str, **variables: Any) -> tuple[dict[str, Any], int]:
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables}, headers=self.headers
        )
        body: dict[str, Any] = response.json()
        if response.status_code != 200 or "errors" in body:
            raise RuntimeError(f"query failed: {str(body)[:300]}")
        return body["data"], len(response.content)

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
    *, postgres: bool = True, threads: int = 4, connections: int = 100
) -> AsyncIterator[Api]:
    """A fresh server (PostgreSQL unless told, in-process workers, process sandbox) with the
    bench package published by alice."""
    idp = LocalIdentityProvider().start()
    env = {
        "CALCGRAPH_OIDC_ISSUER": idp.issuer,
        "CALCGRAPH_SANDBOX": "process",
        "CALCGRAPH_INPROCESS_WORKER_THREADS": str(threads),
    }
    database = "SQLite"
    if postgres:
        await _reset_postgres(POSTGRES_URL)
        env["CALCGRAPH_DATABASE_URL"] = POSTGRES_URL
        database = "PostgreSQL"
    setup = (
        f"HTTP through uvicorn (calcgraph serve, 1 process), RS256 token, {database}, "
        f"in-process broker, {threads} worker threads, process sandbox"
    )
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    try:
        with serve(extra_env=env) as server:
            async with httpx.AsyncClient(
                base_url=server.base_url, limits=limits, timeout=120.0
            ) as http:
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
                    "files": {"main.py": CODE + "\n" + SLEEPY},
                }
                published = await http.post("/packages", json=body, headers=headers)
                if published.status_code != 201:
                    raise RuntimeError(f"publish failed: {published.text[:300]}")
                yield Api(server, http, idp, package, setup)
    finally:
        idp.stop()


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
