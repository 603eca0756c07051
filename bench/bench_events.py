"""Events (issue 23, contract section 9), end to end: real HTTP through uvicorn (`calcgraph
serve`, its own process), a real RS256 token, PostgreSQL, the process sandbox, in two shapes:
`in-process` (the workers in the server's process, no Redis) and `redis+worker` (the
production shape: Redis, and a separate `calcgraph worker` process that runs the jobs and
delivers the webhooks).

- `events_delivery_http`: diamond runs kept going (4 at a time, each driven by long-poll ticks)
  for `PHASE_S` seconds while one consumer follows `GET /events?wait=25` (type
  `calcgraph.job.succeeded`) and a webhook for the same type posts to a receiver on loopback
  (`CALCGRAPH_WEBHOOK_ALLOWED_HOSTS=127.0.0.1`). Figures: the delay from a job finishing (its
  event's `time`, written in the unit of work that finishes the job) to (a) the long-poll
  answering with it and (b) the receiver getting it, p50/p99; events recorded per second;
  the server's CPU (API and worker processes, PostgreSQL's backends apart) per recorded event.
  Then the same with 100 diamond runs at once (`events_recorded_100_runs_http`): the events
  recorded per second alongside 100 running diamond runs.
- `events_flood_http` (production shape): the p50 of a plain tick and of an execute (a real
  job, waited for) without and with 1,000 events recorded per second (by the product's own
  recording, `record_rows`, in 20 units of 50 a second, through the same PostgreSQL and Redis,
  from a process of its own started before its phase, which begins once the process says
  it is ready, `bench/event_flood.py`; read by a
  `GET /events?wait=25` follower and matched against a webhook), in phases that alternate
  (without, with, without, with; each kind pooled), their ratio, and the server's CPU per
  second in each kind.
- `events_pages_http`: 200 open run pages, blind against event-driven (`bench/event_pages.py`).

Every figure gives the load average beside it (the machine is shared).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from bench.bench_scale_tick import REDIS_URL, redis_prefix
from bench.core import Options, Result, niced, percentile, summarise
from bench.event_flood import FLOOD_PER_S
from bench.event_pages import pages
from bench.scale_client import (
    Api,
    CpuSplit,
    Unavailable,
    api,
    cpu_split,
    diamond_nodes,
)
from tests.events.receiver import receiver

PHASE_S = 20.0
RUNS_AT_ONCE = 4
MANY_RUNS = 100
JOB_SUCCEEDED = "calcgraph.job.succeeded"
JOB_ENDED = ("calcgraph.job.succeeded", "calcgraph.job.failed")
_ENV = {"CALCGRAPH_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}
FLOOD_PHASE_S = 12.0
FLOOD_ROUNDS = 4
FLOOD_READY_S = 60.0
"""The longest the flood's process may take to start (import, connect) before its phase."""
# The flood's process is started before its phase, which begins once it says it is ready:
# started a fixed 3 s ahead, at niceness 10 beside the 80 %-busy load its start (about 1.2
# CPU-s of imports) ran up to 5 s into the phase (2026-11-29).
# The flood's process and the follower's run at `Options.flood_nice` (default 10). The 1,000
# events a second stand for other hosts' work (other servers' and workers' units), and the
# follower for a consumer on another host; on this 2-core machine their own CPU (the flood's
# generator 0.13-0.27 CPU-s a second, the follower's parsing of 1,000 events a second) would
# otherwise be counted as a slowdown of the ticks beside them. Niced, they take what the server
# and PostgreSQL leave; what the flood costs those (the recording's statements in PostgreSQL, the
# wake-ups, the answers to the follower's reads, the webhook matching) still counts.
# `--flood-nice 0` measures both unniced (until 2026-11-28 the follower always was).
PAGES = 200
PAGES_PHASE_S = 30.0
BLIND_TICK_S = 2.0
SAFETY_TICK_S = 30.0
RUN_EVENTS = (
    "subscription($run: ID!, $types: [String!], $after: String) "
    "{ events(run: $run, types: $types, after: $after) { id } }"
)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Settings the served processes inherit, for this benchmark only."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.asynccontextmanager
async def _shape(shape: str, threads: int = 4) -> AsyncIterator[Api]:
    with _environment(_ENV):
        if shape == "in-process":
            async with api(postgres=True, threads=threads) as bench:
                yield bench
            return
        with redis_prefix() as prefix:
            async with api(
                postgres=True, threads=threads, redis=(REDIS_URL, prefix), job_worker=True
            ) as bench:
                yield bench


def _server_s(split: CpuSplit) -> float:
    """The API and worker processes' CPU (their sandboxes and PostgreSQL apart)."""
    return split.loop_thread + split.worker_threads


def _cpu_extra(spent: CpuSplit, per: float, unit: str) -> dict[str, object]:
    n = max(per, 1.0)
    return {
        f"server_cpu_ms_per_{unit}": round(_server_s(spent) / n * 1000, 3),
        f"postgres_cpu_ms_per_{unit}": round(spent.postgres / n * 1000, 3),
        f"sandbox_cpu_ms_per_{unit}": round(spent.sandboxes / n * 1000, 3),
        f"redis_cpu_ms_per_{unit}": round(spent.redis / n * 1000, 3),
    }


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


UNAVAILABLE = {"answers": 0}
"""503s the server answered (its database queue full), each retried after its Retry-After."""


async def _events(bench: Api, **params: Any) -> dict[str, Any]:
    while True:
        response = await bench.http.get("/events", params=params, headers=bench.headers)
        if response.status_code != 503:
            break
        UNAVAILABLE["answers"] += 1
        await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
    if response.status_code != 200:
        raise RuntimeError(f"/events answered {response.status_code}: {response.text[:300]}")
    body: dict[str, Any] = response.json()
    return body


async def _count_since(bench: Api, cursor: str) -> int:
    count = 0
    while True:
        page = await _events(bench, after=cursor, limit=500)
        count += len(page["items"])
        if not page["items"]:
            return count
        cursor = page["next_cursor"]


async def _webhook(bench: Api, url: str, types: list[str]) -> None:
    created = await bench.http.post(
        "/webhooks", json={"url": url, "types": types}, headers=bench.headers
    )
    if created.status_code != 201:
        raise RuntimeError(f"webhook refused: {created.text[:300]}")


async def _delivery_phase(shape: str, runs_at_once: int, name: str) -> list[Result]:
    with receiver() as hooks:
        async with _shape(shape) as bench:
            await _webhook(bench, hooks.url, [JOB_SUCCEEDED])
            slug = await bench.workflow(diamond_nodes(bench))
            start = (await _events(bench, after="now"))["next_cursor"]
            polled: dict[str, tuple[float, float]] = {}  # event id -> (time, answered)
            stop = asyncio.Event()

            async def follow() -> None:
                cursor = start
                while True:
                    try:
                        page = await _events(bench, after=cursor, wait=25, type=JOB_SUCCEEDED)
                    except httpx.TransportError:
                        continue  # a kept-alive connection the server closed: ask again
                    answered = time.time()
                    for event in page["items"]:
                        polled[event["id"]] = (_epoch(event["time"]), answered)
                    cursor = page["next_cursor"]

            completed = 0

            async def runs() -> None:
                nonlocal completed
                while not stop.is_set():
                    try:
                        await bench.run_to_end(slug, random.uniform(0, 1e6), limit_s=300)
                    except Unavailable as busy:
                        # The run is left behind (its jobs still run); a new one starts.
                        UNAVAILABLE["answers"] += 1
                        await asyncio.sleep(busy.retry_after)
                        continue
                    except RuntimeError as refused:
                        if "503" not in str(refused):  # a run start the server was too busy for
                            raise
                        UNAVAILABLE["answers"] += 1
                        await asyncio.sleep(1.0)
                        continue
                    completed += 1

            follower = asyncio.create_task(follow())
            await asyncio.sleep(0.5)  # the follower is waiting
            UNAVAILABLE["answers"] = 0
            before, t0 = await cpu_split(bench), time.perf_counter()
            drivers = [asyncio.create_task(runs()) for _ in range(runs_at_once)]
            await asyncio.sleep(PHASE_S)
            stop.set()
            await asyncio.gather(*drivers)
            elapsed = time.perf_counter() - t0
            spent = await cpu_split(bench) - before
            loadavg = [round(x, 2) for x in os.getloadavg()]
            recorded = await _count_since(bench, start)
            # The last jobs' events reach the follower and the receiver.
            await asyncio.sleep(5.0)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
            with hooks.arrived:
                received = list(hooks.received)
            hooked: dict[str, float] = {}
            for got in received:
                hooked.setdefault(got.headers["webhook-id"], got.at)
            poll_ns = [int((a - t) * 1e9) for t, a in polled.values()]
            hook_ns = [int((hooked[i] - t) * 1e9) for i, (t, _) in polled.items() if i in hooked]
            missing = len(set(polled) - set(hooked))
            extra: dict[str, object] = {
                "shape": shape,
                "events_recorded": recorded,
                "events_per_s": round(recorded / elapsed, 1),
                "diamond_runs_completed": completed,
                "answered_503": UNAVAILABLE["answers"],
                **_cpu_extra(spent, recorded, "event"),
                "loadavg": loadavg,
            }
            setup = (
                f"{bench.setup}, {runs_at_once} diamond runs at once for {PHASE_S:g} s, "
                "webhook receiver on loopback"
            )
            return [
                summarise(
                    name,
                    f"{shape}: job finished -> GET /events?wait=25 answers",
                    setup,
                    poll_ns,
                    elapsed,
                    extra=extra,
                ),
                summarise(
                    name,
                    f"{shape}: job finished -> webhook receiver on loopback gets it",
                    setup,
                    hook_ns,
                    elapsed,
                    errors=missing,
                    extra={"shape": shape, "not_received": missing, "loadavg": loadavg},
                ),
            ]


def delivery(options: Options) -> list[Result]:
    results: list[Result] = []
    for shape in ("in-process", "redis+worker"):
        results += asyncio.run(_delivery_phase(shape, RUNS_AT_ONCE, "events_delivery_http"))
    return results


def recorded_100_runs(options: Options) -> list[Result]:
    results: list[Result] = []
    for shape in ("in-process", "redis+worker"):
        results += asyncio.run(_delivery_phase(shape, MANY_RUNS, "events_recorded_100_runs_http"))
    return results


# --- a flood of events against ticks and executes -------------------------------------------


@dataclass
class _FloodPhase:
    """The pooled samples of one kind of phase (with or without the flood)."""

    ticks: list[int] = field(default_factory=list)
    executes: list[int] = field(default_factory=list)
    server_s: float = 0.0
    loop_s: float = 0.0
    postgres_s: float = 0.0
    machine_s: float = 0.0
    client_s: float = 0.0
    elapsed: float = 0.0
    flooded: dict[str, float] = field(default_factory=dict)

    def add(
        self,
        ticks: list[int],
        executes: list[int],
        spent: CpuSplit,
        elapsed: float,
        flooded: dict[str, float],
    ) -> None:
        self.ticks += ticks
        self.executes += executes
        self.server_s += _server_s(spent)
        self.loop_s += spent.loop_thread
        self.machine_s += spent.machine_busy
        self.client_s += spent.client
        self.postgres_s += spent.postgres
        self.elapsed += elapsed
        for key, value in flooded.items():
            self.flooded[key] = self.flooded.get(key, 0.0) + value


class _Flood:
    """The flood (`bench.event_flood`) in a process of its own at niceness `nice`, started and
    ready (imported, connected) before its phase, flooding once told to (`go`)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def ready(cls, prefix: str, user_id: str, seconds: float, nice: int) -> _Flood:
        process = await asyncio.create_subprocess_exec(
            *niced(nice),
            sys.executable,
            "-m",
            "bench.event_flood",
            prefix,
            user_id,
            str(seconds),
            "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        said = await asyncio.wait_for(process.stdout.readline(), FLOOD_READY_S)
        if said.strip() != b"ready":
            raise RuntimeError(f"the flood process did not start ({said[:300]!r})")
        return cls(process)

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")

    async def result(self) -> dict[str, float]:
        """What it recorded, the seconds it took and its CPU seconds (in all, its start
        included, and while flooding)."""
        out, _ = await self.process.communicate()
        if self.process.returncode != 0:
            raise RuntimeError(f"the flood process failed ({self.process.returncode})")
        found: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
        return found


async def _measure(
    bench: Api, slug: str, seconds: float, execute_every: float | None = None
) -> tuple[list[int], list[int]]:
    """Plain ticks of diamond runs (a new one when one ends) and executes of `inc` (a real
    job, waited for), for `seconds`; their latencies in ns. Executes go back to back, or one
    every `execute_every` seconds (one at a time: a late one starts when the previous ends)."""
    ticks: list[int] = []
    executes: list[int] = []
    end = time.monotonic() + seconds

    async def ticking() -> None:
        while time.monotonic() < end:
            run_id = await bench.start(slug, random.uniform(0, 1e6))
            while time.monotonic() < end:
                t0 = time.perf_counter_ns()
                run, _ = await bench.tick(run_id)
                ticks.append(time.perf_counter_ns() - t0)
                if run["status"] in ("completed", "failed", "cancelled"):
                    break
                await asyncio.sleep(0.05)

    async def executing() -> None:
        path = f"/packages/{bench.package}/functions/inc/execute"
        due = time.monotonic()
        while time.monotonic() < end:
            if execute_every is not None:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                due += execute_every
            t0 = time.perf_counter_ns()
            answer = await bench.http.post(
                path,
                json={"inputs": {"x": random.uniform(0, 1e6)}},
                params={"wait": 20},
                headers=bench.headers,
            )
            if answer.status_code != 200:
                raise RuntimeError(f"execute: {answer.status_code} {answer.text[:300]}")
            executes.append(time.perf_counter_ns() - t0)

    await asyncio.gather(ticking(), executing())
    return ticks, executes


FLOOD_PACED_EXECUTE_S = 0.1
"""`events_flood_paced_http`: one execute every this many seconds (10 a second) instead of back
to back (about 25 a second). Back to back, the ticks and executes alone keep the 2-core
machine about 80 % busy, where any extra work lengthens every wait a queue makes (at 80 %
busy, 3 % more work is about 15 % longer waits); paced, the same flood is measured beside a
machine about half busy."""


def flood(options: Options) -> list[Result]:
    return _flood_bench(options, "events_flood_http", None)


def flood_paced(options: Options) -> list[Result]:
    return _flood_bench(options, "events_flood_paced_http", FLOOD_PACED_EXECUTE_S)


def _flood_bench(options: Options, name: str, execute_every: float | None) -> list[Result]:
    async def run() -> list[Result]:
        with receiver() as hooks, redis_prefix() as prefix, _environment(_ENV):
            async with api(
                postgres=True, threads=4, redis=(REDIS_URL, prefix), job_worker=True
            ) as bench:
                await _webhook(bench, hooks.url, ["calcgraph.run.*"])
                me = await bench.http.get("/auth/me", headers=bench.headers)
                user_id = str(me.json()["id"])
                slug = await bench.workflow(diamond_nodes(bench))
                start = (await _events(bench, after="now"))["next_cursor"]
                # The follower reads in a process of its own (`bench.event_follow`), with a
                # token that outlives the benchmark's 2 minutes (tokens live 5).
                token = bench.headers["Authorization"].removeprefix("Bearer ")
                follower = await asyncio.create_subprocess_exec(
                    *niced(options.flood_nice),
                    sys.executable,
                    "-m",
                    "bench.event_follow",
                    str(bench.server.base_url),
                    token,
                    start,
                    stdout=asyncio.subprocess.PIPE,
                )
                await _measure(bench, slug, 3.0, execute_every)  # warm: code cached, pools
                # Phases alternate (without, with, without, with) so that neither kind gets
                # the quieter half of a drifting machine; each kind's samples are pooled.
                figures: dict[str, _FloodPhase] = {
                    "without": _FloodPhase(),
                    "with": _FloodPhase(),
                }
                for phase in ("without", "with") * FLOOD_ROUNDS:
                    flooding = (
                        await _Flood.ready(prefix, user_id, FLOOD_PHASE_S, options.flood_nice)
                        if phase == "with"
                        else None
                    )
                    if flooding is not None:
                        flooding.go()
                    before, t0 = await cpu_split(bench), time.perf_counter()
                    ticks, executes = await _measure(bench, slug, FLOOD_PHASE_S, execute_every)
                    elapsed = time.perf_counter() - t0
                    spent = await cpu_split(bench) - before
                    flooded = await flooding.result() if flooding is not None else {}
                    figures[phase].add(ticks, executes, spent, elapsed, flooded)
                await asyncio.sleep(3.0)
                follower.terminate()
                out, _ = await follower.communicate()
                if follower.returncode != 0:
                    raise RuntimeError(f"the follower failed ({follower.returncode})")
                followed: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
                seen = int(followed["seen"])
                follower_cpu_s = float(followed["cpu_s"])
                results = []
                base_tick = percentile(sorted(figures["without"].ticks), 50)
                base_exec = percentile(sorted(figures["without"].executes), 50)
                without = figures["without"]
                base_cpu = without.server_s / without.elapsed
                for phase, found in figures.items():
                    ticks, executes, elapsed = found.ticks, found.executes, found.elapsed
                    tick_p50 = percentile(sorted(ticks), 50)
                    exec_p50 = percentile(sorted(executes), 50)
                    recorded = found.flooded.get("recorded", 0.0)
                    flood_s = found.flooded.get("seconds", 1.0)
                    server_cpu = found.server_s / elapsed
                    extra: dict[str, object] = {
                        "events_flooded": int(recorded),
                        "flood_events_per_s": round(recorded / flood_s, 1),
                        "flood_process_cpu_s_per_s": round(
                            found.flooded.get("cpu_s", 0.0) / flood_s, 3
                        ),
                        "flood_generator_cpu_ms_per_event_while_flooding": round(
                            found.flooded.get("flooding_cpu_s", 0.0) / max(1.0, recorded) * 1000,
                            4,
                        ),
                        "server_cpu_ratio_to_without": round(server_cpu / max(1e-9, base_cpu), 3),
                        "server_extra_cpu_ms_per_flood_event": round(
                            (server_cpu - base_cpu) * elapsed / max(1.0, recorded) * 1000, 4
                        ),
                        "tick_p50_ratio_to_without": round(tick_p50 / base_tick, 3),
                        "execute_p50_ms": round(exec_p50 / 1e6, 2),
                        "execute_p99_ms": round(percentile(sorted(executes), 99) / 1e6, 2),
                        "execute_p50_ratio_to_without": round(exec_p50 / base_exec, 3),
                        "executes": len(executes),
                        "server_cpu_s_per_s": round(server_cpu, 3),
                        "postgres_cpu_s_per_s": round(found.postgres_s / elapsed, 3),
                        "api_loop_cpu_s_per_s": round(found.loop_s / elapsed, 3),
                        "machine_busy_cpu_s_per_s": round(found.machine_s / elapsed, 3),
                        "load_generator_cpu_s_per_s": round(found.client_s / elapsed, 3),
                        "phases": FLOOD_ROUNDS,
                        "follower_saw": seen,
                        "follower_requests": int(followed["requests"]),
                        "follower_cpu_s": round(follower_cpu_s, 2),
                        "flood_nice": options.flood_nice,
                        "loadavg": [round(x, 2) for x in os.getloadavg()],
                    }
                    results.append(
                        summarise(
                            name,
                            f"plain tick (executes in extra), {phase} a "
                            f"{FLOOD_PER_S} events/s flood",
                            f"{bench.setup}, one tick loop and one execute loop "
                            + (
                                f"(an execute every {execute_every:g} s) "
                                if execute_every is not None
                                else "(back to back) "
                            )
                            + "at once for "
                            f"{FLOOD_PHASE_S:g} s x {FLOOD_ROUNDS} phases alternating, a GET "
                            "/events follower, a webhook",
                            ticks,
                            elapsed,
                            extra=extra,
                        )
                    )
                return results

    return asyncio.run(run())


BENCHMARKS = {
    "events_delivery_http": delivery,
    "events_recorded_100_runs_http": recorded_100_runs,
    "events_flood_http": flood,
    "events_flood_paced_http": flood_paced,
    "events_pages_http": pages,
}
