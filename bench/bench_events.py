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
  job, waited for) without, then with 1,000 events recorded per second (by the product's own
  recording, `record_rows`, in 20 units of 50 a second, through the same PostgreSQL and Redis,
  read by a `GET /events?wait=25` follower and matched against a webhook), and their ratio.
- `events_pages_http` (production shape): 200 open run pages, each a client with its own
  connections, over 200 diamond runs: blind, each page ticks every 2 s; subscribed, as the web
  app's run page does, each page holds the GraphQL `events` subscription of its run
  (graphql-transport-ws) and ticks on each event, plus a 30 s safety tick; event-driven, each page
  follows `GET /events?type=calcgraph.job.succeeded&type=calcgraph.job.failed&run=<its
  run>&wait=25` (woken only by its own run's jobs) and ticks when it answers, plus a 30 s
  safety tick. Ticks per second,
  the server's CPU per second (API and worker processes; PostgreSQL apart), jobs finished, and
  the ratio of ticks.

Every figure gives the load average beside it (the machine is shared).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import aiohttp
import httpx

from bench.bench_scale_tick import REDIS_URL, redis_prefix
from bench.core import Options, Result, percentile, summarise
from bench.scale_client import (
    POSTGRES_URL,
    Api,
    CpuSplit,
    Unavailable,
    api,
    cpu_split,
    diamond_nodes,
)
from calcgraph.db.engine import Database
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.service import event_row, record_rows
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.notify import RedisNotifier
from tests.events.receiver import receiver

PHASE_S = 20.0
RUNS_AT_ONCE = 4
MANY_RUNS = 100
JOB_SUCCEEDED = "calcgraph.job.succeeded"
JOB_ENDED = ("calcgraph.job.succeeded", "calcgraph.job.failed")
_ENV = {"CALCGRAPH_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}
FLOOD_PER_S = 1000
FLOOD_UNITS_PER_S = 20
FLOOD_PHASE_S = 12.0
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


async def _flood(prefix: str, user_id: str, stop: asyncio.Event) -> int:
    """`FLOOD_PER_S` `calcgraph.user.login` events of `user_id` a second, recorded by the
    product's `record_rows` in units of work whose hook numbers them and publishes through
    Redis, as a server's would, until `stop`."""
    database = Database(POSTGRES_URL)
    notifier = RedisNotifier(REDIS_URL, prefix)
    attach_signal(database, notifier)
    per_unit = FLOOD_PER_S // FLOOD_UNITS_PER_S
    recorded = 0
    loop = asyncio.get_running_loop()
    next_at = loop.time()
    try:
        while not stop.is_set():
            rows = [
                event_row(USER_LOGIN, user_id, {"username": "alice", "flood": recorded + i})
                for i in range(per_unit)
            ]
            async with database.write_session() as session:
                await record_rows(session, rows)
            recorded += per_unit
            next_at += 1 / FLOOD_UNITS_PER_S
            await asyncio.sleep(max(0.0, next_at - loop.time()))
    finally:
        await notifier.close()
        await database.dispose()
    return recorded


async def _measure(bench: Api, slug: str, seconds: float) -> tuple[list[int], list[int]]:
    """Plain ticks of diamond runs (a new one when one ends) and executes of `inc` (a real
    job, waited for), back to back, for `seconds`; their latencies in ns."""
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
        while time.monotonic() < end:
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


def flood(options: Options) -> list[Result]:
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
                seen = 0

                async def follow() -> None:
                    nonlocal seen
                    cursor = start
                    while True:
                        page = await _events(bench, after=cursor, wait=25, limit=500)
                        seen += len(page["items"])
                        cursor = page["next_cursor"]

                follower = asyncio.create_task(follow())
                await _measure(bench, slug, 3.0)  # warm: code cached, pools open
                figures: dict[str, tuple[list[int], list[int], CpuSplit, float, int]] = {}
                for phase in ("without", "with"):
                    stop = asyncio.Event()
                    flooding = (
                        asyncio.create_task(_flood(prefix, user_id, stop))
                        if phase == "with"
                        else None
                    )
                    before, t0 = await cpu_split(bench), time.perf_counter()
                    ticks, executes = await _measure(bench, slug, FLOOD_PHASE_S)
                    elapsed = time.perf_counter() - t0
                    spent = await cpu_split(bench) - before
                    stop.set()
                    flooded = await flooding if flooding is not None else 0
                    figures[phase] = (ticks, executes, spent, elapsed, flooded)
                await asyncio.sleep(3.0)
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
                results = []
                base_tick = percentile(sorted(figures["without"][0]), 50)
                base_exec = percentile(sorted(figures["without"][1]), 50)
                for phase, (ticks, executes, spent, elapsed, flooded) in figures.items():
                    tick_p50 = percentile(sorted(ticks), 50)
                    exec_p50 = percentile(sorted(executes), 50)
                    extra: dict[str, object] = {
                        "events_flooded": flooded,
                        "flood_events_per_s": round(flooded / elapsed, 1),
                        "tick_p50_ratio_to_without": round(tick_p50 / base_tick, 3),
                        "execute_p50_ms": round(exec_p50 / 1e6, 2),
                        "execute_p99_ms": round(percentile(sorted(executes), 99) / 1e6, 2),
                        "execute_p50_ratio_to_without": round(exec_p50 / base_exec, 3),
                        "executes": len(executes),
                        "server_cpu_s_per_s": round(_server_s(spent) / elapsed, 3),
                        "postgres_cpu_s_per_s": round(spent.postgres / elapsed, 3),
                        "follower_saw": seen,
                        "loadavg": [round(x, 2) for x in os.getloadavg()],
                    }
                    results.append(
                        summarise(
                            "events_flood_http",
                            f"plain tick (executes in extra), {phase} a "
                            f"{FLOOD_PER_S} events/s flood",
                            f"{bench.setup}, one tick loop and one execute loop at once for "
                            f"{FLOOD_PHASE_S:g} s, a GET /events follower, a webhook",
                            ticks,
                            elapsed,
                            extra=extra,
                        )
                    )
                return results

    return asyncio.run(run())


# --- 200 open run pages: event-driven against blind ticking ---------------------------------


async def _pages_phase(mode: str) -> Result:
    with redis_prefix() as prefix:
        async with api(
            postgres=True, threads=4, redis=(REDIS_URL, prefix), job_worker=True
        ) as bench:
            slug = await bench.workflow(diamond_nodes(bench))
            run_ids = [await bench.start(slug, float(i)) for i in range(PAGES)]
            start = (await _events(bench, after="now"))["next_cursor"]
            ticks = busy = 0
            stop = asyncio.Event()
            headers = bench.headers
            base = bench.server.base_url

            async def tick(session: aiohttp.ClientSession, run_id: str) -> str:
                nonlocal ticks, busy
                async with session.post(f"/workflow-runs/{run_id}/tick", headers=headers) as r:
                    ticks += 1
                    if r.status != 200:
                        busy += r.status == 503
                        return "error"
                    return str((await r.json())["status"])

            async def tick_until_answered(session: aiohttp.ClientSession, run_id: str) -> None:
                """An event-driven page's tick: a refused one (503) is sent again after its
                Retry-After, as the web app's ticker does (blind pages just tick again 2 s
                later). Without it a refused tick leaves the run waiting for the safety tick:
                no job of it runs, so no event comes."""
                nonlocal ticks, busy
                while not stop.is_set():
                    path = f"/workflow-runs/{run_id}/tick"
                    async with session.post(path, headers=headers) as r:
                        ticks += 1
                        if r.status != 503:
                            return
                        busy += 1
                        retry_after = float(r.headers.get("Retry-After", "1"))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), retry_after)

            async def blind(run_id: str, offset: float) -> None:
                connector = aiohttp.TCPConnector(limit=1)
                async with aiohttp.ClientSession(base_url=base, connector=connector) as session:
                    await asyncio.sleep(offset)
                    while not stop.is_set():
                        await tick(session, run_id)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stop.wait(), BLIND_TICK_S)

            async def driven(run_id: str, offset: float) -> None:
                nonlocal busy
                # One connection for the long-poll, one for ticks: a browser tab's two.
                connector = aiohttp.TCPConnector(limit=2)
                async with aiohttp.ClientSession(base_url=base, connector=connector) as session:
                    await asyncio.sleep(offset)
                    await tick_until_answered(session, run_id)  # the page opens
                    cursor = start
                    last_tick = time.monotonic()
                    params: list[tuple[str, str]] = [("type", t) for t in JOB_ENDED]
                    params.append(("run", run_id))  # only its own run's jobs wake it
                    while not stop.is_set():
                        wait = max(0.0, min(25.0, SAFETY_TICK_S - (time.monotonic() - last_tick)))
                        query = [*params, ("after", cursor), ("wait", f"{wait:.2f}")]
                        async with session.get("/events", params=query, headers=headers) as r:
                            if r.status == 503:
                                busy += 1
                                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                                continue
                            page = await r.json()
                        cursor = page["next_cursor"]
                        mine = any(e["data"].get("run_id") == run_id for e in page["items"])
                        if page["items"] and not mine:
                            raise RuntimeError(f"run={run_id} answered another run's events")
                        if mine or time.monotonic() - last_tick >= SAFETY_TICK_S:
                            if stop.is_set():
                                break
                            await tick_until_answered(session, run_id)
                            last_tick = time.monotonic()

            async def subscribed(run_id: str, offset: float) -> None:
                """The web app's run page: the `events` subscription of its run over
                graphql-transport-ws, a tick on each of its jobs' events; a subscription that
                ends (the server busy) is opened again from now, with a tick, as the page's
                fallback does."""
                nonlocal busy
                connector = aiohttp.TCPConnector(limit=2)
                async with aiohttp.ClientSession(base_url=base, connector=connector) as session:
                    await asyncio.sleep(offset)
                    await tick_until_answered(session, run_id)  # the page opens
                    after: str | None = start
                    while not stop.is_set():
                        try:
                            followed = await follow(session, run_id, after)
                        except (aiohttp.ClientError, TypeError, ValueError):
                            followed = False  # refused at the handshake, or not JSON
                        if not followed:
                            busy += 1
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(stop.wait(), 1.0)
                            after = None
                            await tick_until_answered(session, run_id)

            async def follow(
                session: aiohttp.ClientSession, run_id: str, after: str | None
            ) -> bool:
                """Until `stop` (True) or the subscription ends (False)."""
                async with session.ws_connect(
                    "/graphql", protocols=("graphql-transport-ws",)
                ) as ws:
                    init = {"Authorization": headers["Authorization"]}
                    await ws.send_json({"type": "connection_init", "payload": init})
                    ack = await ws.receive_json()
                    if ack.get("type") != "connection_ack":
                        return False
                    variables = {"run": run_id, "types": list(JOB_ENDED), "after": after}
                    payload = {"query": RUN_EVENTS, "variables": variables}
                    await ws.send_json({"id": "1", "type": "subscribe", "payload": payload})
                    last_tick = time.monotonic()
                    while not stop.is_set():
                        left = max(0.1, SAFETY_TICK_S - (time.monotonic() - last_tick))
                        message: dict[str, Any] | None = None
                        with contextlib.suppress(TimeoutError):
                            message = await asyncio.wait_for(ws.receive_json(), left)
                        if stop.is_set():
                            break
                        kind = None if message is None else message.get("type")
                        if kind == "ping":
                            await ws.send_json({"type": "pong"})
                            continue
                        failed = kind == "next" and "errors" in (message or {}).get("payload", {})
                        if kind in ("error", "complete") or failed:
                            return False
                        if kind == "next" or time.monotonic() - last_tick >= SAFETY_TICK_S:
                            await tick_until_answered(session, run_id)
                            last_tick = time.monotonic()
                return True

            page = {"blind": blind, "event-driven": driven, "subscribed": subscribed}[mode]
            before, t0 = await cpu_split(bench), time.perf_counter()
            pages = [
                asyncio.create_task(page(run_id, i * BLIND_TICK_S / PAGES))
                for i, run_id in enumerate(run_ids)
            ]
            await asyncio.sleep(PAGES_PHASE_S)
            elapsed = time.perf_counter() - t0
            spent = await cpu_split(bench) - before
            loadavg = [round(x, 2) for x in os.getloadavg()]
            measured_ticks = ticks
            # The jobs finished within the measured time (counted before the pages stop).
            finished = await _count_since_typed(bench, start)
            stop.set()
            failed = sum(1 for task in pages if task.done() and task.exception() is not None)
            for task in pages:
                task.cancel()
            await asyncio.gather(*pages, return_exceptions=True)
            return Result(
                benchmark="events_pages_http",
                scenario=f"{PAGES} open run pages, {mode} ticking",
                setup=(
                    f"{bench.setup}, {PAGES} diamond runs, each page aiohttp with its own "
                    f"connections, {PAGES_PHASE_S:g} s"
                ),
                requests=measured_ticks,
                seconds=round(elapsed, 3),
                rps=measured_ticks / elapsed,
                p50_us=float("nan"),
                p99_us=float("nan"),
                errors=failed,
                extra={
                    "pages_failed": failed,
                    "answered_503": busy,
                    "mode": mode,
                    "ticks_per_s": round(measured_ticks / elapsed, 2),
                    "server_cpu_s_per_s": round(_server_s(spent) / elapsed, 3),
                    "server_cpu_ms_per_tick": round(
                        _server_s(spent) / max(1, measured_ticks) * 1000, 2
                    ),
                    "postgres_cpu_s_per_s": round(spent.postgres / elapsed, 3),
                    "client_cpu_s_per_s": round(spent.client / elapsed, 3),
                    "jobs_finished": finished,
                    "server_cpu_ms_per_job_finished": round(
                        _server_s(spent) / max(1, finished) * 1000, 2
                    ),
                    # The API process's event loop (HTTP, auth, ticks, long-polls: what the
                    # pages drive) apart from the other threads and the worker process (what
                    # running the jobs costs, the same whoever watches them).
                    "api_loop_cpu_ms_per_job_finished": round(
                        spent.loop_thread / max(1, finished) * 1000, 2
                    ),
                    "worker_cpu_ms_per_job_finished": round(
                        spent.worker_threads / max(1, finished) * 1000, 2
                    ),
                    "ticks_per_job_finished": round(measured_ticks / max(1, finished), 2),
                    "loadavg": loadavg,
                },
            )


async def _count_since_typed(bench: Api, cursor: str) -> int:
    count = 0
    while True:
        page = await _events(bench, after=cursor, limit=500, type=list(JOB_ENDED))
        count += len(page["items"])
        if not page["items"]:
            return count
        cursor = page["next_cursor"]


def pages(options: Options) -> list[Result]:
    blind_result = asyncio.run(_pages_phase("blind"))
    driven_result = asyncio.run(_pages_phase("event-driven"))
    subscribed_result = asyncio.run(_pages_phase("subscribed"))
    for result in (driven_result, subscribed_result):
        _ratios(blind_result, result)
    return [blind_result, driven_result, subscribed_result]


def _ratios(blind_result: Result, driven_result: Result) -> None:
    ratio = blind_result.rps / driven_result.rps if driven_result.rps else float("nan")
    cpu_ratio = float(str(blind_result.extra["server_cpu_s_per_s"])) / max(
        1e-9, float(str(driven_result.extra["server_cpu_s_per_s"]))
    )
    driven_result.extra["fewer_ticks_than_blind_x"] = round(ratio, 2)
    driven_result.extra["less_server_cpu_than_blind_x"] = round(cpu_ratio, 2)
    # The same work? The arms run for the same time: compare what each got done per CPU.
    per_job = "server_cpu_ms_per_job_finished"
    driven_result.extra["less_server_cpu_per_job_than_blind_x"] = round(
        float(str(blind_result.extra[per_job]))
        / max(1e-9, float(str(driven_result.extra[per_job]))),
        2,
    )
    per_job = "api_loop_cpu_ms_per_job_finished"
    driven_result.extra["less_api_loop_cpu_per_job_than_blind_x"] = round(
        float(str(blind_result.extra[per_job]))
        / max(1e-9, float(str(driven_result.extra[per_job]))),
        2,
    )


BENCHMARKS = {
    "events_delivery_http": delivery,
    "events_recorded_100_runs_http": recorded_100_runs,
    "events_flood_http": flood,
    "events_pages_http": pages,
}
