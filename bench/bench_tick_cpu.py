"""Machine CPU per changing and per unchanged tick (issue 24, point 1: targets 5 ms and
0.5 ms), in the production shape: real HTTP through uvicorn (`calcgraph serve`, its own
process), PostgreSQL, Redis and one `calcgraph worker` process, process sandbox.

- `tick_cpu_unchanged_http`: `SLEEPERS` runs of one node whose job sleeps (nothing changes),
  ticked round-robin with plain ticks on one connection, 2,000 ticks once every job runs.
- `tick_cpu_changing_http`: `RUNS` diamond runs created first (not measured), then each
  ticked with plain ticks every `GAP_S` on connections of their own (10 at a time) until it
  ends. A tick is changing when its answer's revision moved; the phase's CPU less its
  unchanged ticks at the first phase's cost, over its changing ticks.

CPU is the benchmark's own parts (`bench.scale_client.cpu_split`: API process, worker
process, sandboxes, PostgreSQL backends of its database, Redis, this load generator), shown
with and without the sandboxes (the jobs' own code); every figure carries the load average.
PostgreSQL: `CALCGRAPH_BENCH_POSTGRES_URL`; Redis: `CALCGRAPH_BENCH_REDIS_URL`.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from bench.bench_scale_tick import REDIS_URL, redis_prefix
from bench.core import Options, Result, summarise
from bench.scale_client import (
    TERMINAL,
    Api,
    CpuSplit,
    api,
    cpu_split,
    diamond_nodes,
    gather_limited,
    poller_client,
)

RUNS = 100
SLEEPERS = 4
"""The worker's threads (`api`'s default)."""
GAP_S = 0.05
UNCHANGED_TICKS = 2000


def _sleepy(bench: Api) -> dict[str, object]:
    binding = {"source": "input_node", "input_key": "x", "from_port": "value"}
    return {
        "node_key": "s",
        "kind": "function",
        "function": f"{bench.package}/sleepy",
        "input_bindings": {"x": binding},
    }


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _figures(cpu: CpuSplit, ticks: int) -> dict[str, object]:
    without = cpu.ours - cpu.sandboxes
    return {
        "ticks": ticks,
        "cpu_ms_per_tick": round(cpu.ours / ticks * 1000, 3),
        "cpu_ms_per_tick_without_sandboxes": round(without / ticks * 1000, 3),
        # The platform's share (API, worker, sandboxes, PostgreSQL, Redis): the machine's
        # less this load generator, which stands for the browsers on their users' machines.
        "platform_cpu_ms_per_tick": round((cpu.ours - cpu.client) / ticks * 1000, 3),
        "cpu_s_api": round(cpu.loop_thread, 2),
        "cpu_s_api_threads_and_worker": round(cpu.worker_threads, 2),
        "cpu_s_worker": round(cpu.worker_process, 2),
        "cpu_s_sandboxes": cpu.sandboxes,
        "cpu_s_postgres": cpu.postgres,
        "cpu_s_redis": cpu.redis,
        "cpu_s_load_generator": cpu.client,
        "machine_busy_s": cpu.machine_busy,
        "loadavg_1_5_15": _load(),
    }


async def _unchanged(bench: Api) -> tuple[Result, float, float, float]:
    # As many sleeping jobs as the worker has threads: all of them run, none waits to start.
    slug = await bench.workflow([diamond_nodes(bench)[0], _sleepy(bench)])
    ids = [await bench.start(slug, float(i)) for i in range(SLEEPERS)]
    for run_id in ids:
        await bench.tick(run_id)  # submits the job
    jobs = [(await bench.tick(run_id))[0]["node_states"]["s"]["job_id"] for run_id in ids]
    deadline = time.monotonic() + 60
    for job_id in jobs:
        while (await bench.http.get(f"/jobs/{job_id}", headers=bench.headers)).json()[
            "status"
        ] != "running":
            if time.monotonic() > deadline:
                raise RuntimeError("the sleeping jobs did not start")
            await asyncio.sleep(0.1)
    for i in range(50):
        await bench.tick(ids[i % SLEEPERS])
    latencies: list[int] = []
    async with poller_client(bench, 1) as session:
        before, t0 = await cpu_split(bench), time.perf_counter()
        for i in range(UNCHANGED_TICKS):
            start = time.perf_counter_ns()
            view = await bench.poll_tick(ids[i % SLEEPERS], session)
            latencies.append(time.perf_counter_ns() - start)
            if view["status"] != "running":
                raise RuntimeError(f"run {view['id']} is {view['status']}")
        elapsed = time.perf_counter() - t0
        cpu = await cpu_split(bench) - before
    figures = _figures(cpu, UNCHANGED_TICKS)
    result = summarise(
        "tick_cpu_unchanged_http",
        f"{SLEEPERS} runs of one sleeping job, plain ticks round-robin, nothing changes",
        bench.setup,
        latencies,
        elapsed,
        extra=figures,
    )
    return (
        result,
        cpu.ours / UNCHANGED_TICKS,
        (cpu.ours - cpu.sandboxes) / UNCHANGED_TICKS,
        (cpu.ours - cpu.client) / UNCHANGED_TICKS,
    )


async def _drive(bench: Api, run_id: str, counts: dict[str, int], latencies: list[int]) -> None:
    revision = -1
    async with poller_client(bench, 1) as session:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            start = time.perf_counter_ns()
            view: dict[str, Any] = await bench.poll_tick(run_id, session)
            latencies.append(time.perf_counter_ns() - start)
            changed = view["revision"] != revision
            counts["changing" if changed else "unchanged"] += 1
            revision = view["revision"]
            if view["status"] in TERMINAL:
                if view["status"] != "completed":
                    raise RuntimeError(f"run {run_id} ended {view['status']}")
                counts["completed"] += 1
                return
            await asyncio.sleep(GAP_S)
    raise RuntimeError(f"run {run_id} did not end")


async def _changing(
    bench: Api, unchanged_ms: float, unchanged_bare_ms: float, unchanged_platform_ms: float
) -> Result:
    slug = await bench.workflow(diamond_nodes(bench))
    await bench.run_to_end(slug, -1.0, 60)  # warm: sandboxes started
    ids = await gather_limited(16, *(bench.start(slug, i + time.time() % 1) for i in range(RUNS)))
    counts = {"changing": 0, "unchanged": 0, "completed": 0}
    latencies: list[int] = []
    before, t0 = await cpu_split(bench), time.perf_counter()
    await gather_limited(10, *(_drive(bench, run_id, counts, latencies) for run_id in ids))
    elapsed = time.perf_counter() - t0
    cpu = await cpu_split(bench) - before
    changing = max(1, counts["changing"])
    figures = _figures(cpu, len(latencies))
    unchanged = counts["unchanged"]
    bare = cpu.ours - cpu.sandboxes
    figures |= {
        "changing_ticks": counts["changing"],
        "unchanged_ticks": unchanged,
        "completed": counts["completed"],
        "changing_ticks_per_run": round(counts["changing"] / max(1, counts["completed"]), 2),
        "cpu_ms_per_completed_run": round(cpu.ours / max(1, counts["completed"]) * 1000, 2),
        # The phase's CPU less its unchanged ticks at the unchanged phase's cost.
        "cpu_ms_per_changing_tick": round(
            (cpu.ours - unchanged * unchanged_ms) / changing * 1000, 3
        ),
        "platform_cpu_ms_per_changing_tick": round(
            (cpu.ours - cpu.client - unchanged * unchanged_platform_ms) / changing * 1000, 3
        ),
        "cpu_ms_per_changing_tick_without_sandboxes": round(
            (bare - unchanged * unchanged_bare_ms) / changing * 1000, 3
        ),
        "target_ms_changing": 5.0,
        "target_ms_unchanged": 0.5,
    }
    return summarise(
        "tick_cpu_changing_http",
        f"{RUNS} diamond runs (created before), plain ticks every {GAP_S * 1000:.0f} ms, "
        "10 runs at a time",
        bench.setup,
        latencies,
        elapsed,
        errors=RUNS - counts["completed"],
        extra=figures,
    )


def tick_cpu(options: Options) -> list[Result]:
    async def run(prefix: str) -> list[Result]:
        # Two servers: the sleeping jobs of the first would hold the worker's threads.
        async with api(redis=(REDIS_URL, prefix), job_worker=True) as bench:
            unchanged, per_tick, bare, platform = await _unchanged(bench)
        async with api(redis=(REDIS_URL, prefix), job_worker=True) as bench:
            changing = await _changing(bench, per_tick, bare, platform)
        return [unchanged, changing]

    with redis_prefix() as prefix:
        return asyncio.run(run(prefix))


BENCHMARKS = {"tick_cpu_http": tick_cpu}
