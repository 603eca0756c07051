"""The soak benchmark (issue 27): what 5 hostile users cost 50 honest ones, for `--minutes`.

The production shape: `calcgraph serve` (uvicorn) on PostgreSQL with Redis, jobs run by a
separate `calcgraph worker` process (process sandbox), every call real HTTP over loopback with
a real RS256 token. Two phases of one server: the honest users alone (the first third), then
with the hostile users (the rest). Every loop is bounded by its phase's deadline and talks to
loopback only.

Honest users (50), each in turn: execute `inc` (`?wait=30`), then start a diamond (4 trivial
functions) and tick it without waiting every 0.25 s until it ends, then rest 1 s.

Hostile users (5), each its own attack, as fast as the server answers it:
- big outputs: executes a function returning 8 MiB, lists its jobs 500 at a time, reads a run
  whose 3 nodes each output 8 MiB, whole and through GraphQL `nodeStates`;
- huge workflows: saves 12,000-node workflows and starts runs of them (until the runs quota
  answers 429; then cancels them), lists its runs and reads one whole;
- socket floods: opens 60 WebSockets that never send `connection_init` and 25 authenticated
  ones (over the 50 and 20 the contract allows), holds them, closes them, again;
- background threads: executes a handler that starts a busy thread and forks a sleeping child;
- GraphQL games: fragments that double each other, 2,000 aliases, nested lists, and
  `workflowRuns(limit: 12) { planSnapshot nodeStates ... }`.

Printed per phase: the honest execute and tick p50/p99, `/health` p99 (polled every 0.5 s),
CPU per honest operation (everything the platform used, hostile work included: API, worker,
sandboxes, PostgreSQL, Redis, divided by the honest executes and ticks), the load average;
and for the whole soak the API process's memory high-water mark (VmHWM), the worker's, and
the database's growth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx

from bench.core import Options, Result, percentile
from bench.scale_client import POSTGRES_URL, Api, api, cpu_split, diamond_nodes

REDIS_URL = os.environ.get("CALCGRAPH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
HONEST_USERS = 50
HOSTILE_USERS = 5
BIG_BYTES = 8 * 1024 * 1024
HUGE_NODES = 12_000
HEALTH_EVERY_S = 0.5
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


async def _health(api: Api, phase: Phase, until: float) -> None:
    while time.monotonic() < until:
        began = time.perf_counter_ns()
        with contextlib.suppress(httpx.HTTPError):
            await api.http.get("/health")
        phase.health.append(time.perf_counter_ns() - began)
        await asyncio.sleep(HEALTH_EVERY_S)


def _count(phase: Phase, response: httpx.Response) -> None:
    phase.hostile_calls += 1
    if 400 <= response.status_code < 500:
        phase.refused += 1


async def _big_outputs(api: Api, user: str, package: str, phase: Phase, until: float) -> None:
    headers = api.headers_of(user)
    nodes = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
        *(
            {
                "node_key": f"B{i}",
                "kind": "function",
                "function": f"{package}/big",
                "input_bindings": {
                    "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                },
            }
            for i in range(3)
        ),
    ]
    slug = f"soak-big-{uuid.uuid4().hex[:6]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    _count(phase, await api.http.post("/workflows", json=body, headers=headers))
    run_id = None
    n = 0.0
    while time.monotonic() < until:
        headers = api.headers_of(user)
        n += 1
        with contextlib.suppress(httpx.HTTPError):
            _count(
                phase,
                await api.http.post(
                    f"/packages/{package}/functions/big/execute",
                    json={"inputs": {"x": n}},
                    params={"wait": 30},
                    headers=headers,
                ),
            )
            _count(phase, await api.http.get("/jobs", params={"limit": 500}, headers=headers))
            if run_id is None:
                started = await api.http.post(
                    f"/workflows/{slug}/runs", json={"inputs": {"x": n}}, headers=headers
                )
                _count(phase, started)
                run_id = started.json().get("id") if started.status_code == 201 else None
            if run_id is not None:
                _count(phase, await api.http.post(f"/workflow-runs/{run_id}/tick", headers=headers))
                _count(phase, await api.http.get(f"/workflow-runs/{run_id}", headers=headers))
                query = "query($id: ID!) { workflowRun(id: $id) { nodeStates { outputs } } }"
                _count(
                    phase,
                    await api.http.post(
                        "/graphql",
                        json={"query": query, "variables": {"id": run_id}},
                        headers=headers,
                    ),
                )


async def _huge_workflows(api: Api, user: str, phase: Phase, until: float) -> None:
    inc = f"{api.package}/inc"
    binding = {"x": {"source": "input_node", "input_key": "x", "from_port": "value"}}
    nodes: list[dict[str, Any]] = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}
    ]
    nodes += [
        {"node_key": f"n{i}", "kind": "function", "function": inc, "input_bindings": binding}
        for i in range(HUGE_NODES)
    ]
    slugs: list[str] = []
    runs: list[str] = []
    while time.monotonic() < until:
        headers = api.headers_of(user)
        with contextlib.suppress(httpx.HTTPError):
            if len(slugs) < 3:
                slug = f"soak-huge-{uuid.uuid4().hex[:6]}"
                body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
                created = await api.http.post("/workflows", json=body, headers=headers)
                _count(phase, created)
                if created.status_code == 201:
                    slugs.append(slug)
                continue
            started = await api.http.post(
                f"/workflows/{slugs[len(runs) % 3]}/runs",
                json={"inputs": {"x": 1.0}},
                headers=headers,
            )
            _count(phase, started)
            if started.status_code == 201:
                runs.append(started.json()["id"])
            elif started.status_code == 429:  # the runs quota: cancel and go on
                for run_id in runs[:20]:
                    _count(
                        phase,
                        await api.http.post(f"/workflow-runs/{run_id}/cancel", headers=headers),
                    )
                del runs[:20]
            _count(
                phase, await api.http.get("/workflow-runs", params={"limit": 500}, headers=headers)
            )
            if runs:
                _count(phase, await api.http.get(f"/workflow-runs/{runs[-1]}", headers=headers))


async def _socket_flood(api: Api, user: str, phase: Phase, until: float) -> None:
    from websockets.asyncio.client import connect

    url = api.server.base_url.replace("http://", "ws://") + "/graphql"

    async def hold(authenticated: bool) -> None:
        with contextlib.suppress(Exception):
            async with connect(url, subprotocols=["graphql-transport-ws"], open_timeout=30) as ws:  # type: ignore[list-item]
                if authenticated:
                    token = api.headers_of(user)["Authorization"]
                    init = {"type": "connection_init", "payload": {"Authorization": token}}
                    await ws.send(json.dumps(init))
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.recv(), 4)
                    await asyncio.wait_for(ws.recv(), 4)
                phase.refused += ws.close_code is not None and ws.close_code >= 4400
        phase.hostile_calls += 1

    while time.monotonic() < until:
        await asyncio.gather(*(hold(False) for _ in range(60)), *(hold(True) for _ in range(25)))


async def _threads(api: Api, user: str, package: str, phase: Phase, until: float) -> None:
    n = 0.0
    while time.monotonic() < until:
        n += 1
        with contextlib.suppress(httpx.HTTPError):
            _count(
                phase,
                await api.http.post(
                    f"/packages/{package}/functions/spin/execute",
                    json={"inputs": {"x": n}},
                    params={"wait": 30},
                    headers=api.headers_of(user),
                ),
            )


def _doubling_fragments(levels: int) -> str:
    parts = ["query Q { ...F0 }", "fragment F0 on Query { me { username } }"]
    for i in range(1, levels + 1):
        parts.append(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}")
    parts[0] = f"query Q {{ ...F{levels} }}"
    return "\n".join(parts)


async def _graphql_games(api: Api, user: str, phase: Phase, until: float) -> None:
    aliases = "{ " + " ".join(f"a{i}: me {{ username }}" for i in range(2000)) + " }"
    nested = "{ " + "packages(limit: 100) { items { functions { versions { id } } } } " * 3 + "}"
    runs = """{ workflowRuns(limit: 12) { items { planSnapshot
        nodeStates { nodeKey outputs } workflowVersion { graph } } } }"""
    documents = [_doubling_fragments(30), aliases, nested, runs]
    i = 0
    while time.monotonic() < until:
        i += 1
        with contextlib.suppress(httpx.HTTPError):
            response = await api.http.post(
                "/graphql",
                json={"query": documents[i % len(documents)]},
                headers=api.headers_of(user),
            )
            phase.hostile_calls += 1
            body = response.json()
            phase.refused += bool(body.get("errors"))


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


async def _phase(
    api: Api,
    phase: Phase,
    seconds: float,
    slug: str,
    hostile: list[Callable[[float], Awaitable[None]]],
) -> None:
    before = await cpu_split(api)
    began = time.monotonic()
    until = began + seconds
    tasks = [
        *(_honest(api, slug, f"honest{u:02d}", phase, until) for u in range(HONEST_USERS)),
        _health(api, phase, until),
        *(attack(until) for attack in hostile),
    ]
    await asyncio.gather(*tasks)
    phase.seconds = time.monotonic() - began
    phase.cpu = (await cpu_split(api) - before).ours
    phase.load = os.getloadavg()


def _result(phase: Phase, setup: str, extra: dict[str, object]) -> Result:
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
            **extra,
        },
    )


async def _soak(minutes: float) -> list[Result]:
    total = minutes * 60
    quiet_s, loud_s = total / 3, total * 2 / 3
    prefix = f"soak-{uuid.uuid4().hex[:6]}:"
    async with api(
        postgres=True, threads=4, connections=200, redis=(REDIS_URL, prefix), job_worker=True
    ) as server:
        slug = await server.workflow(diamond_nodes(server))
        users = [f"hostile{h}" for h in range(HOSTILE_USERS)]
        big_pkg = await _publish_hostile(server, users[0])
        spin_pkg = await _publish_hostile(server, users[3])
        db_before = await _database_bytes()
        quiet = Phase("honest users alone")
        await _phase(server, quiet, quiet_s, slug, [])
        loud = Phase("with 5 hostile users")
        attacks: list[Callable[[float], Awaitable[None]]] = [
            lambda until: _big_outputs(server, users[0], big_pkg, loud, until),
            lambda until: _huge_workflows(server, users[1], loud, until),
            lambda until: _socket_flood(server, users[2], loud, until),
            lambda until: _threads(server, users[3], spin_pkg, loud, until),
            lambda until: _graphql_games(server, users[4], loud, until),
        ]
        await _phase(server, loud, loud_s, slug, attacks)
        db_after = await _database_bytes()
        api_hwm = max(_status_kb(pid, "VmHWM") for pid in server.server.api_pids()) / 1024
        worker_hwm = _status_kb(server.worker_pid, "VmHWM") / 1024
        setup = f"{server.setup}; {HONEST_USERS} honest users, {minutes:g} min in all"
    whole = {
        "api_memory_hwm_mb": round(api_hwm, 1),
        "worker_memory_hwm_mb": round(worker_hwm, 1),
        "database_growth_mb": round((db_after - db_before) / 2**20, 1),
    }
    return [_result(quiet, setup, {}), _result(loud, setup, whole)]


def soak(options: Options) -> list[Result]:
    results = asyncio.run(_soak(options.soak_minutes))
    for result in results:
        print(f"soak_hostile_http  {result.scenario:22} {result.seconds:7.1f} s  {result.extra}")
    return results


BENCHMARKS = {"soak_hostile_http": soak}
