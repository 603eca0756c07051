"""Canary deployments (issue 26, contract 11), through the API in-process (ASGI, a real token,
in-process broker and workers, process sandbox, SQLite), published by `POST /packages`:

- `canary_split`: 1,000 unpinned executes (8 at a time, each waiting for its result) of a
  package whose 2.0.0 is a canary at 10/90 (1.0.0: 90, 2.0.0: 10): the split observed (the
  calls each version got, from `GET /packages/{id}/deployment`), then the canary made due (its
  `ends_at` set to now) and the time from due to its promotion by the workers' own timer (the
  canary judge, at the sweeper's default interval), read from the canary's `decided_at`.
  p50/p99: execute latency.
- `canary_routing_overhead`: the added latency of routing on an execute: `wait=0` executes
  (submit only: resolve, route, insert, answer 202), alternating between a rolling package and
  a package in canary, p50 of each and their difference; CPU of the API process per execute
  (its worker threads, which run the submitted jobs, included in both).
Each figure gives the 1-minute load average.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select, update

from bench.core import Options, Result, percentile, summarise
from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.packages import canary_rules
from calcgraph.domain.packages.models import PackageCanary
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider

CALLS = 1000
AT_ONCE = 8
OVERHEAD_CALLS = 600


def _cpu() -> float:
    with open(f"/proc/{os.getpid()}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _body(name: str, version: str, canary: dict[str, Any] | None = None) -> dict[str, Any]:
    package: dict[str, Any] = {"name": name, "version": version}
    if canary is not None:
        package["deployment"] = {"strategy": "canary", "canary": canary}
    return {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": package,
            "functions": {
                "run": {
                    "handler": "main:run",
                    "inputs": {"x": {"type": "Float", "required": True}},
                    "outputs": {"y": {"type": "Float"}},
                }
            },
        },
        "files": {"main.py": f"def run(x):\n    return {{'y': x + {version[0]}}}\n"},
    }


@dataclass
class Bench:
    client: httpx.AsyncClient
    database: Database
    headers: dict[str, str]
    retries: int = 0

    async def publish(self, body: dict[str, Any]) -> str:
        response = await self.client.post("/packages", json=body, headers=self.headers)
        if response.status_code != 201:
            raise RuntimeError(f"publish refused: {response.text[:300]}")
        package_id: str = response.json()["package_id"]
        return package_id

    async def execute(self, package: str, x: float, wait: float) -> httpx.Response:
        for _ in range(20):
            response = await self.client.post(
                f"/packages/{package}/functions/run/execute",
                params={"wait": wait},
                json={"inputs": {"x": x}},
                headers=self.headers,
            )
            if response.status_code != 503:
                break
            # SQLite busy under load: retried after `retry_after`, as the clients do.
            self.retries += 1
            await asyncio.sleep(float(response.json().get("retry_after", 1)))
        if response.status_code not in (200, 202):
            raise RuntimeError(f"execute failed: {response.status_code} {response.text[:300]}")
        return response

    async def state(self, package_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/packages/{package_id}/deployment", headers=self.headers)
        answer: dict[str, Any] = response.json()
        return answer


@contextlib.asynccontextmanager
async def _platform() -> AsyncIterator[Bench]:
    idp = LocalIdentityProvider().start()
    tmp = Path(tempfile.mkdtemp(prefix="calcgraph-bench-canary-"))
    url = f"sqlite+aiosqlite:///{tmp / 'canary.db'}"
    migrator = Database(url)
    await upgrade(migrator)
    await migrator.dispose()
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=url,
        oidc_issuer=idp.issuer,
        sandbox="process",
        code_cache_dir=tmp / "code",
        inprocess_worker_threads=4,
    )
    database = Database(url)
    app = create_app(settings, database)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                await create_user(database, idp, "alice")
                yield Bench(client, database, idp.headers("alice"))
    finally:
        await database.dispose()
        idp.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _canary_package(bench: Bench, name: str, split: dict[str, float]) -> str:
    await bench.publish(_body(name, "1.0.0"))
    return await bench.publish(_body(name, "2.0.0", {"traffic_split": split, "duration": "1h"}))


async def _split(bench: Bench) -> Result:
    name = f"bc-{uuid.uuid4().hex[:6]}"
    pid = await _canary_package(bench, name, {"1.0.0": 90, "2.0.0": 10})
    await bench.execute(name, -1, 60)  # stages the code
    latencies: list[int] = []
    queue = iter(range(CALLS - 1))
    cpu0, t0 = _cpu(), time.perf_counter()

    async def caller() -> None:
        for i in queue:
            start = time.perf_counter_ns()
            answer = await bench.execute(name, i + time.time() % 1, 60)
            if answer.json()["status"] != "success":
                raise RuntimeError(f"a canary call failed: {answer.text[:300]}")
            latencies.append(time.perf_counter_ns() - start)

    await asyncio.gather(*(caller() for _ in range(AT_ONCE)))
    elapsed, cpu = time.perf_counter() - t0, _cpu() - cpu0
    observed = (await bench.state(pid))["observed"]
    routed: dict[str, int] = observed["routed"]
    due = datetime.now(UTC)
    async with bench.database.write_session() as session:
        await session.execute(
            update(PackageCanary).where(PackageCanary.package_id == pid).values(ends_at=due)
        )
    polled_from = time.perf_counter()
    decided_at = None
    for _ in range(600):
        async with bench.database.read_session() as session:
            row = (
                await session.execute(
                    select(PackageCanary.status, PackageCanary.decided_at).where(
                        PackageCanary.package_id == pid
                    )
                )
            ).one()
        if row.status != "running":
            decided_at = row.decided_at
            break
        await asyncio.sleep(0.05)
    if decided_at is None:
        raise RuntimeError("the canary was not decided within 30 s of being due")
    state = await bench.state(pid)
    total = sum(routed.values())
    return summarise(
        "canary_split",
        "1,000 unpinned calls at 1.0.0: 90 / 2.0.0: 10",
        f"ASGI in-process, in-process workers (4 threads), process sandbox, SQLite, {AT_ONCE} "
        "callers",
        latencies,
        elapsed,
        extra={
            "routed": routed,
            "candidate_share_pct": round(100 * routed.get("2.0.0", 0) / total, 1),
            "candidate_jobs_judged": observed["jobs"],
            "candidate_p95_ms": observed["latency_p95_ms"],
            "due_to_decision_s": round((decided_at - due).total_seconds(), 3),
            "due_to_seen_s": round(time.perf_counter() - polled_from, 3),
            "decision": f"{state['history'][-1]['action']} ({state['current']} current)",
            "sweeper_interval_s": Settings.model_fields["sweeper_interval_seconds"].default,
            "judge_interval_s": min(
                Settings.model_fields["sweeper_interval_seconds"].default,
                canary_rules.JUDGE_INTERVAL_SECONDS,
            ),
            "cpu_ms_per_execute": round(1000 * cpu / len(latencies), 3),
            "retries_after_503": bench.retries,
            "load1_end": _load(),
        },
    )


async def _overhead(bench: Bench) -> Result:
    rolling, canary = f"br-{uuid.uuid4().hex[:6]}", f"bk-{uuid.uuid4().hex[:6]}"
    await bench.publish(_body(rolling, "1.0.0"))
    await bench.publish(_body(rolling, "2.0.0"))
    await _canary_package(bench, canary, {"1.0.0": 90, "2.0.0": 10})
    for name in (rolling, canary):
        await bench.execute(name, -1, 60)
        for i in range(50):  # warm-up, discarded
            await bench.execute(name, i + 0.5, 0)
    timings: dict[str, list[int]] = {rolling: [], canary: []}
    cpu: dict[str, float] = {rolling: 0.0, canary: 0.0}
    t0 = time.perf_counter()
    for i in range(OVERHEAD_CALLS):
        for name in (rolling, canary) if i % 2 == 0 else (canary, rolling):
            c0, start = _cpu(), time.perf_counter_ns()
            await bench.execute(name, i + time.time() % 1, 0)
            timings[name].append(time.perf_counter_ns() - start)
            cpu[name] += _cpu() - c0
    elapsed = time.perf_counter() - t0
    p50 = {name: percentile(sorted(values), 50) / 1e6 for name, values in timings.items()}
    return summarise(
        "canary_routing_overhead",
        "execute wait=0: package in canary (10/90)",
        "ASGI in-process, in-process workers (4 threads), process sandbox, SQLite, 1 caller, "
        "alternating with a rolling package",
        timings[canary],
        elapsed / 2,
        extra={
            "p50_rolling_ms": round(p50[rolling], 3),
            "p50_canary_ms": round(p50[canary], 3),
            "routing_added_p50_ms": round(p50[canary] - p50[rolling], 3),
            "cpu_ms_per_execute_rolling": round(1000 * cpu[rolling] / OVERHEAD_CALLS, 3),
            "cpu_ms_per_execute_canary": round(1000 * cpu[canary] / OVERHEAD_CALLS, 3),
        },
    )


def split(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        async with _platform() as bench:
            return [await _split(bench)]

    return asyncio.run(run())


def overhead(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        async with _platform() as bench:
            return [await _overhead(bench)]

    return asyncio.run(run())


BENCHMARKS = {
    "canary_split": split,
    "canary_routing_overhead": overhead,
}
