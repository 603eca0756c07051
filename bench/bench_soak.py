"""The soak benchmark (issue 27): what 5 hostile users cost 50 honest ones, for `--minutes`.

The production shape: `calcgraph serve` (uvicorn) on PostgreSQL with Redis, jobs run by a
separate `calcgraph worker` process (process sandbox), every call real HTTP over loopback with
a real RS256 token. Two phases of one server: the honest users alone (the first third), then
with the hostile users (the rest). Every loop is bounded by its phase's deadline and talks to
loopback only.

Honest users (50), each in turn: execute `inc` (`?wait=30`), then start a diamond (4 trivial
functions) and tick it without waiting every 0.25 s until it ends, then rest 1 s.

Hostile users (5), each its own attack as fast as the server answers it (big outputs, huge
workflows, socket floods, background threads, GraphQL games: `bench.soak_clients`), run in a
process of their own, and so does the `/health` probe: in this process they would share the
loop that times the honest users (decoding 8 MiB answers on it) and wait behind them.

Printed per phase: the honest execute and tick p50/p99, `/health` p99 (polled every 0.5 s by
its own process), CPU per honest operation (everything the platform used, hostile work
included: API, worker, sandboxes, PostgreSQL, Redis, divided by the honest executes and
ticks), the load average, and the API's event-loop stalls over 60 ms (`bench.stall_watch`: how
many, their seconds, and the frames that took most of them);
and for the whole soak the API process's memory high-water mark (VmHWM), the worker's, and
the database's growth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import soak_clients, stall_watch
from bench.core import Options, Result, niced, percentile
from bench.scale_client import POSTGRES_URL, Api, api, cpu_split, diamond_nodes

REDIS_URL = os.environ.get("CALCGRAPH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
HONEST_USERS = 50
HOSTILE_USERS = 5
BIG_BYTES = 8 * 1024 * 1024
TICK_EVERY_S = 0.25
REST_S = 1.0

HOSTILE_CODE = f"""
import os
import threading
import time


def big(x):
    return {{"y": "b" * {BIG_BYTES}}}


def spin(x):
    def burn():
        end = time.time() + 30
        while time.time() < end:
            pass

    threading.Thread(target=burn, daemon=True).start()
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    return {{"y": x}}
"""
_F = {"type": "Float", "required": True}
HOSTILE_FUNCTIONS = {
    "big": {"handler": "main:big", "inputs": {"x": _F}, "outputs": {"y": {"type": "String"}}},
    "spin": {"handler": "main:spin", "inputs": {"x": _F}, "outputs": {"y": {"type": "Float"}}},
}


@dataclass
class Phase:
    name: str
    executes: list[int] = field(default_factory=list)
    ticks: list[int] = field(default_factory=list)
    health: list[int] = field(default_factory=list)
    errors: int = 0
    hostile_calls: int = 0
    refused: int = 0
    """Hostile calls answered 4xx (quotas, validation, socket closes): the defences at work."""
    seconds: float = 0.0
    cpu: float = 0.0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    window: tuple[float, float] = (0.0, 0.0)
    """Wall times of its start and end, to find its event-loop stalls."""

    @property
    def honest_ops(self) -> int:
        return len(self.executes) + len(self.ticks)


def _ms(samples: list[int], p: float) -> float:
    return round(percentile(sorted(samples), p) / 1e6, 1) if samples else float("nan")


async def _honest(api: Api, slug: str, user: str, phase: Phase, until: float) -> None:
    headers = api.headers_of(user)
    path = f"/packages/{api.package}/functions/inc/execute"
    n = 0.0
    while time.monotonic() < until:
        headers = api.headers_of(user)
        n += 1
        try:
            began = time.perf_counter_ns()
            done = await api.http.post(
                path, json={"inputs": {"x": n}}, params={"wait": 30}, headers=headers
            )
            phase.executes.append(time.perf_counter_ns() - began)
            if done.status_code != 200:
                phase.errors += 1
            started = await api.http.post(
                f"/workflows/{slug}/runs", json={"inputs": {"x": n}}, headers=headers
            )
            if started.status_code != 201:
                phase.errors += 1
                await asyncio.sleep(REST_S)
                continue
            run_id = started.json()["id"]
            while time.monotonic() < until:
                began = time.perf_counter_ns()
                ticked = await api.http.post(f"/workflow-runs/{run_id}/tick", headers=headers)
                phase.ticks.append(time.perf_counter_ns() - began)
                if ticked.status_code != 200:
                    phase.errors += 1
                    break
                if ticked.json()["status"] in ("completed", "failed", "cancelled"):
                    phase.errors += ticked.json()["status"] != "completed"
                    break
                await asyncio.sleep(TICK_EVERY_S)
        except httpx.HTTPError:
            phase.errors += 1
        await asyncio.sleep(REST_S)


async def _publish_hostile(api: Api, user: str) -> str:
    package = f"soak-{uuid.uuid4().hex[:8]}"
    body = {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": {"name": package, "version": "1.0.0", "versioning_strategy": "auto"},
            "functions": HOSTILE_FUNCTIONS,
        },
        "files": {"main.py": HOSTILE_CODE},
        "visibility": "private",
    }
    published = await api.http.post("/packages", json=body, headers=api.headers_of(user))
    if published.status_code != 201:
        raise RuntimeError(f"hostile publish failed: {published.text[:300]}")
    return package


async def _database_bytes() -> int:
    url = POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await connection.close()


def _status_kb(pid: int | None, key: str) -> int:
    if pid is None:
        return 0
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


async def _client(order: bytes, nice: int = 0) -> dict[str, Any]:
    """A client process of `bench.soak_clients` at niceness `nice`: its orders in, its
    findings out."""
    process = await asyncio.create_subprocess_exec(
        *niced(nice),
        sys.executable,
        "-m",
        "bench.soak_clients",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate(order)
    if process.returncode != 0:
        raise RuntimeError(f"a soak client process failed ({process.returncode})")
    found: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return found


def _orders(api: Api, role: str, seconds: float, **more: Any) -> bytes:
    idp = api.idp
    key = idp.keys[idp.current_kid]
    return soak_clients.orders(
        role, api.server.base_url, api.package, idp.issuer, idp.current_kid, key, seconds, **more
    )


async def _phase(
    api: Api,
    phase: Phase,
    seconds: float,
    slug: str,
    hostile: dict[str, Any] | None,
    hostile_nice: int,
) -> None:
    """The honest users here; the `/health` probe and the hostile users (when `hostile` names
    them and their packages) each in a process of its own, the hostile users' at niceness
    `hostile_nice`."""
    before = await cpu_split(api)
    wall = time.time()
    began = time.monotonic()
    until = began + seconds
    clients = [_client(_orders(api, "health", seconds))]
    if hostile is not None:
        clients.append(_client(_orders(api, "hostile", seconds, **hostile), hostile_nice))
    found, *_ = await asyncio.gather(
        asyncio.gather(*clients),
        *(_honest(api, slug, f"honest{u:02d}", phase, until) for u in range(HONEST_USERS)),
    )
    phase.seconds = time.monotonic() - began
    phase.window = (wall, time.time())
    phase.cpu = (await cpu_split(api) - before).ours
    phase.load = os.getloadavg()
    phase.health = found[0]["latencies_ns"]
    if hostile is not None:
        phase.hostile_calls = found[1]["hostile_calls"]
        phase.refused = found[1]["refused"]


def _result(phase: Phase, setup: str, stalls: Path, extra: dict[str, object]) -> Result:
    executes, ticks = sorted(phase.executes), sorted(phase.ticks)
    return Result(
        benchmark="soak_hostile_http",
        scenario=phase.name,
        setup=setup,
        requests=phase.honest_ops,
        seconds=round(phase.seconds, 1),
        rps=phase.honest_ops / phase.seconds if phase.seconds else float("nan"),
        p50_us=percentile(ticks, 50) / 1000 if ticks else float("nan"),
        p99_us=percentile(ticks, 99) / 1000 if ticks else float("nan"),
        errors=phase.errors,
        extra={
            "execute_p50_ms": _ms(executes, 50),
            "execute_p99_ms": _ms(executes, 99),
            "tick_p99_ms": _ms(ticks, 99),
            "health_p99_ms": _ms(phase.health, 99),
            "honest_executes": len(executes),
            "honest_ticks": len(ticks),
            "cpu_ms_per_honest_op": round(phase.cpu * 1000 / max(phase.honest_ops, 1), 1),
            "hostile_calls": phase.hostile_calls,
            "hostile_refused": phase.refused,
            "loadavg": [round(x, 2) for x in phase.load],
            **stall_watch.summary(stall_watch.read(stalls, *phase.window)),
            **extra,
        },
    )


async def _soak(minutes: float, hostile_nice: int) -> list[Result]:
    total = minutes * 60
    quiet_s, loud_s = total / 3, total * 2 / 3
    prefix = f"soak-{uuid.uuid4().hex[:6]}:"
    stalls = Path(tempfile.mkdtemp(prefix="calcgraph-soak-")) / "stalls.jsonl"
    async with api(
        postgres=True,
        threads=4,
        connections=200,
        redis=(REDIS_URL, prefix),
        job_worker=True,
        extra_env=stall_watch.environment(stalls),
    ) as server:
        slug = await server.workflow(diamond_nodes(server))
        users = [f"hostile{h}" for h in range(HOSTILE_USERS)]
        big_pkg = await _publish_hostile(server, users[0])
        spin_pkg = await _publish_hostile(server, users[3])
        db_before = await _database_bytes()
        quiet = Phase("honest users alone")
        await _phase(server, quiet, quiet_s, slug, None, hostile_nice)
        loud = Phase("with 5 hostile users")
        hostile = {"users": users, "packages": {"big": big_pkg, "spin": spin_pkg}}
        await _phase(server, loud, loud_s, slug, hostile, hostile_nice)
        db_after = await _database_bytes()
        api_hwm = max(_status_kb(pid, "VmHWM") for pid in server.server.api_pids()) / 1024
        worker_hwm = _status_kb(server.worker_pid, "VmHWM") / 1024
        setup = f"{server.setup}; {HONEST_USERS} honest users, {minutes:g} min in all"
    whole = {
        "api_memory_hwm_mb": round(api_hwm, 1),
        "worker_memory_hwm_mb": round(worker_hwm, 1),
        "database_growth_mb": round((db_after - db_before) / 2**20, 1),
        "hostile_nice": hostile_nice,
    }
    return [_result(quiet, setup, stalls, {}), _result(loud, setup, stalls, whole)]


def soak(options: Options) -> list[Result]:
    results = asyncio.run(_soak(options.soak_minutes, options.hostile_nice))
    for result in results:
        print(f"soak_hostile_http  {result.scenario:22} {result.seconds:7.1f} s  {result.extra}")
    return results


BENCHMARKS = {"soak_hostile_http": soak}
