"""`events_pages_http` (production shape: PostgreSQL, Redis, `calcgraph serve`, one `calcgraph
worker`): 200 open run pages, each a client with its own connections, each ticking its run as
the web app's run page does (`web/src/lib/ticker.ts`), in three arms:

- blind: a tick every 2 s (the specification's polling);
- event-driven: a tick when `GET /events?type=calcgraph.job.succeeded&type=calcgraph.job.failed
  &run=<its run>&wait=25` answers one of its run's jobs, plus a 30 s safety tick;
- subscribed: the same with the GraphQL `events` subscription of its run (graphql-transport-ws),
  the web app's own way; a subscription that fails falls back to the 2 s tick and is opened
  again 30 s later, as the web app does.

Every page opens at a random moment of the first 2 s, stops when its run has ended, and
honours Retry-After: a tick refused with 503 is not sent again before the server's wait is
over (a blind page: nor before its next 2 s); an event that arrives while a tick is in flight
asks for one more tick right after it, never two at once.

Two scenarios: `quick` (diamond runs of trivial jobs, 4 worker threads, 30 s: the runs end
within the phase either way) and `long` (runs of three chained jobs of `NAP_S` seconds each,
16 worker threads, 60 s: pages wait tens of seconds between their run's events, as they do
for real calculations). Figures: ticks per second (and long-polls per second), the server's
CPU per second and per finished job (API and worker processes, PostgreSQL apart), the ratios
against blind, and the load average."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.bench_scale_tick import REDIS_URL, redis_prefix
from bench.core import Options, Result
from bench.scale_client import Api, CpuSplit, api, cpu_split, diamond_nodes

PAGES = 200
POLL_S = 2.0
SAFETY_S = 30.0
RESUBSCRIBE_S = 30.0
JOB_ENDED = ("calcgraph.job.succeeded", "calcgraph.job.failed")
TERMINAL = ("completed", "failed", "cancelled")
RUN_EVENTS = (
    "subscription($run: ID!, $types: [String!], $after: String) "
    "{ events(run: $run, types: $types, after: $after) { id } }"
)


@dataclass(frozen=True)
class Scenario:
    name: str
    threads: int
    seconds: float
    nodes: Callable[[Api], list[dict[str, Any]]]


def _naps(bench: Api) -> list[dict[str, Any]]:
    def nap(key: str, source: str | None) -> dict[str, Any]:
        binding = (
            {"source": "input_node", "input_key": "x", "from_port": "value"}
            if source is None
            else {"source": "edge", "from_node_key": source, "from_port": "y"}
        )
        return {
            "node_key": key,
            "kind": "function",
            "function": f"{bench.package}/nap",
            "input_bindings": {"x": binding},
        }

    return [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
        nap("A", None),
        nap("B", "A"),
        nap("C", "B"),
    ]


SCENARIOS = (
    Scenario("quick", 4, 30.0, diamond_nodes),
    Scenario("long", 16, 60.0, _naps),
)


@dataclass
class Counts:
    ticks: int = 0
    refused: int = 0
    """Ticks answered 503 or 429 (each waited its Retry-After before the next)."""
    polls: int = 0
    """Long-poll requests (event-driven arm)."""
    ended: int = 0
    """Pages whose run ended (they stopped ticking)."""
    fallbacks: int = 0
    """Subscriptions that failed (their page ticked every 2 s until it opened one again)."""
    why: dict[str, int] = field(default_factory=dict)
    """Why they failed: the socket's close code, or the message that ended the stream."""


@dataclass
class Page:
    """One run page: the web app's ticker. `live` while its event stream is connected (a safety
    tick every 30 s), else a tick every 2 s; `nudge` is set by its event stream."""

    session: aiohttp.ClientSession
    run_id: str
    headers: dict[str, str]
    counts: Counts
    stop: asyncio.Event
    live: bool = False
    nudge: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    async def _tick(self) -> float | None:
        """Tick once: None when answered, else the seconds the server asked to wait."""
        path = f"/workflow-runs/{self.run_id}/tick"
        async with self.session.post(path, headers=self.headers) as answer:
            self.counts.ticks += 1
            if answer.status in (429, 503):
                self.counts.refused += 1
                return float(answer.headers.get("Retry-After", "1"))
            if answer.status != 200:
                raise RuntimeError(f"tick answered {answer.status}: {await answer.text()}")
            if (await answer.json())["status"] in TERMINAL:
                self.ended.set()
        return None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        due = not_before = loop.time()
        while not self.stop.is_set() and not self.ended.is_set():
            wait = max(due, not_before) - loop.time()
            if wait > 0:
                woken = await _first(self.stop.wait(), self.nudge.wait(), seconds=wait)
                if self.stop.is_set():
                    return
                if woken:  # an event: tick as soon as the server allows
                    self.nudge.clear()
                    due = loop.time()
                continue
            self.nudge.clear()
            retry = await self._tick()
            now = loop.time()
            if retry is not None:
                not_before = now + retry
                due = now if self.live else now + POLL_S
                continue
            due = now + (SAFETY_S if self.live else POLL_S)
            if self.nudge.is_set():  # an event came while the tick was in flight
                due = now
        if self.ended.is_set():
            self.counts.ended += 1


async def _first(*waits: Awaitable[Any], seconds: float) -> bool:
    """Whether one of `waits` finished within `seconds` (the others are cancelled)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return bool(done)


async def _long_poll(page: Page, start: str) -> None:
    """The event-driven page's stream: its run's job endings through the long-poll."""
    page.live = True
    cursor = start
    params: list[tuple[str, str]] = [("type", t) for t in JOB_ENDED]
    params.append(("run", page.run_id))
    while not page.stop.is_set() and not page.ended.is_set():
        query = [*params, ("after", cursor), ("wait", "25")]
        async with page.session.get("/events", params=query, headers=page.headers) as answer:
            page.counts.polls += 1
            if answer.status in (429, 503):
                await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
                continue
            if answer.status != 200:
                raise RuntimeError(f"/events answered {answer.status}: {await answer.text()}")
            body = await answer.json()
        cursor = body["next_cursor"]
        if body["items"]:
            page.nudge.set()


async def _subscription(page: Page, start: str) -> None:
    """The web app's stream: the `events` subscription of its run from the phase's start; one
    that fails leaves the page on the 2 s tick until it is opened again, from now and with a
    tick, `RESUBSCRIBE_S` later."""
    after: str | None = start
    while not page.stop.is_set() and not page.ended.is_set():
        why = "client error"
        with contextlib.suppress(aiohttp.ClientError, TypeError, ValueError):
            why = await _subscribe(page, after)
        page.counts.why[why] = page.counts.why.get(why, 0) + 1
        after = None
        if page.stop.is_set() or page.ended.is_set():
            return
        page.live = False
        page.counts.fallbacks += 1
        await _first(page.stop.wait(), page.ended.wait(), seconds=RESUBSCRIBE_S)


async def _subscribe(page: Page, after: str | None) -> str:
    """Follow the run's events until the stream ends; why it ended."""
    async with page.session.ws_connect("/graphql", protocols=("graphql-transport-ws",)) as ws:
        await ws.send_json({"type": "connection_init", "payload": dict(page.headers)})
        acked = await ws.receive()
        if acked.type != aiohttp.WSMsgType.TEXT or json.loads(acked.data).get("type") != (
            "connection_ack"
        ):
            return f"not acknowledged: close {ws.close_code} {acked.extra or ''}".strip()
        variables = {"run": page.run_id, "types": list(JOB_ENDED), "after": after}
        payload = {"query": RUN_EVENTS, "variables": variables}
        await ws.send_json({"id": "1", "type": "subscribe", "payload": payload})
        page.live = True
        if after is None:
            page.nudge.set()  # what happened while it was closed: one tick looks
        while not page.stop.is_set() and not page.ended.is_set():
            message: dict[str, Any] | None = None
            with contextlib.suppress(TimeoutError):
                message = await asyncio.wait_for(ws.receive_json(), 1.0)
            kind = None if message is None else message.get("type")
            if kind == "ping":
                await ws.send_json({"type": "pong"})
            elif kind == "next" and "errors" not in (message or {}).get("payload", {}):
                page.nudge.set()
            elif kind is not None:  # error, complete, or errors
                errors = (message or {}).get("payload", {})
                if isinstance(errors, dict):
                    errors = errors.get("errors", errors)
                return f"stream ended: {kind} {str(errors)[:160]}"
        return "page done"


PER_USER = {
    "CALCGRAPH_LIMIT_REQUESTS_IN_FLIGHT_PER_USER": str(4 * PAGES),
    "CALCGRAPH_LIMIT_SOCKETS_PER_USER": str(4 * PAGES),
    "CALCGRAPH_LIMIT_PENDING_SOCKETS_PER_ADDRESS": str(4 * PAGES),
    "CALCGRAPH_LIMIT_SERVER_SECONDS_PER_MINUTE": "3600",
}
"""The pages stand for many users' tabs, but all sign in as alice from one address: her limits
of requests in flight (100), sockets (20) and server time, and the address's 50 sockets not yet
authenticated, would refuse what 200 users on their own machines would be let through."""


async def _arm(scenario: Scenario, mode: str) -> Result:
    saved = {key: os.environ.get(key) for key in PER_USER}
    os.environ.update(PER_USER)  # inherited by the served processes
    try:
        return await _arm_served(scenario, mode)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def _arm_served(scenario: Scenario, mode: str) -> Result:
    with redis_prefix() as prefix:
        async with api(
            postgres=True, threads=scenario.threads, redis=(REDIS_URL, prefix), job_worker=True
        ) as bench:
            slug = await bench.workflow(scenario.nodes(bench))
            run_ids = [await bench.start(slug, float(i)) for i in range(PAGES)]
            start = await _cursor(bench)
            counts = Counts()
            stop = asyncio.Event()
            jitter = random.Random(23)  # the same moments in every arm

            async def open_page(run_id: str, at: float) -> None:
                connector = aiohttp.TCPConnector(limit=2)  # a browser tab's two connections
                async with aiohttp.ClientSession(
                    base_url=bench.server.base_url, connector=connector
                ) as session:
                    await asyncio.sleep(at)
                    page = Page(session, run_id, bench.headers, counts, stop)
                    streams = []
                    if mode == "event-driven":
                        streams.append(asyncio.create_task(_long_poll(page, start)))
                    elif mode == "subscribed":
                        streams.append(asyncio.create_task(_subscription(page, start)))
                    try:
                        await page.run()
                    finally:
                        for stream in streams:
                            stream.cancel()
                        await asyncio.gather(*streams, return_exceptions=True)

            before, t0 = await cpu_split(bench), time.perf_counter()
            pages = [
                asyncio.create_task(open_page(run_id, jitter.uniform(0, POLL_S)))
                for run_id in run_ids
            ]
            await asyncio.sleep(scenario.seconds)
            elapsed = time.perf_counter() - t0
            spent = await cpu_split(bench) - before
            loadavg = [round(x, 2) for x in os.getloadavg()]
            measured = Counts(**vars(counts))
            finished = await _jobs_ended_since(bench, start)
            stop.set()
            errors = [p.exception() for p in pages if p.done() and p.exception() is not None]
            failed = len(errors)
            if errors:
                print(f"{mode}: {failed} pages failed, e.g. {errors[0]!r}")
            await asyncio.gather(*pages, return_exceptions=True)
            return _result(
                scenario, mode, bench, measured, spent, elapsed, finished, failed, loadavg
            )


def _result(
    scenario: Scenario,
    mode: str,
    bench: Api,
    counts: Counts,
    spent: CpuSplit,
    elapsed: float,
    finished: int,
    failed: int,
    loadavg: list[float],
) -> Result:
    server = spent.loop_thread + spent.worker_threads
    return Result(
        benchmark="events_pages_http",
        scenario=f"{scenario.name} jobs: {PAGES} open run pages, {mode} ticking",
        setup=(
            f"{bench.setup}, {PAGES} runs, each page aiohttp with its own connections, "
            f"{scenario.seconds:g} s"
        ),
        requests=counts.ticks,
        seconds=round(elapsed, 3),
        rps=counts.ticks / elapsed,
        p50_us=float("nan"),
        p99_us=float("nan"),
        errors=failed,
        extra={
            "scenario": scenario.name,
            "mode": mode,
            "pages_failed": failed,
            "ticks_per_s": round(counts.ticks / elapsed, 2),
            "long_polls_per_s": round(counts.polls / elapsed, 2),
            "answered_503": counts.refused,
            "pages_whose_run_ended": counts.ended,
            "subscriptions_failed": counts.fallbacks,
            "subscriptions_ended_why": dict(counts.why),
            "jobs_finished": finished,
            "ticks_per_job_finished": round(counts.ticks / max(1, finished), 2),
            "server_cpu_s_per_s": round(server / elapsed, 3),
            "server_cpu_ms_per_tick": round(server / max(1, counts.ticks) * 1000, 2),
            "server_cpu_ms_per_job_finished": round(server / max(1, finished) * 1000, 2),
            "api_loop_cpu_s_per_s": round(spent.loop_thread / elapsed, 3),
            "worker_cpu_s_per_s": round(spent.worker_threads / elapsed, 3),
            "postgres_cpu_s_per_s": round(spent.postgres / elapsed, 3),
            "client_cpu_s_per_s": round(spent.client / elapsed, 3),
            "loadavg": loadavg,
        },
    )


async def _cursor(bench: Api) -> str:
    answer = await bench.http.get("/events", params={"after": "now"}, headers=bench.headers)
    answer.raise_for_status()
    return str(answer.json()["next_cursor"])


async def _jobs_ended_since(bench: Api, cursor: str) -> int:
    count = 0
    while True:
        params: dict[str, Any] = {"after": cursor, "limit": 500, "type": list(JOB_ENDED)}
        answer = await bench.http.get("/events", params=params, headers=bench.headers)
        answer.raise_for_status()
        page = answer.json()
        count += len(page["items"])
        if not page["items"]:
            return count
        cursor = page["next_cursor"]


def _ratios(blind: Result, other: Result) -> None:
    def ratio(key: str) -> float:
        return round(float(str(blind.extra[key])) / max(1e-9, float(str(other.extra[key]))), 2)

    other.extra["fewer_ticks_than_blind_x"] = round(blind.rps / other.rps, 2) if other.rps else 0
    other.extra["less_server_cpu_than_blind_x"] = ratio("server_cpu_s_per_s")
    other.extra["less_server_cpu_per_job_than_blind_x"] = ratio("server_cpu_ms_per_job_finished")


def pages(options: Options) -> list[Result]:
    results: list[Result] = []
    for scenario in SCENARIOS:
        arms = [asyncio.run(_arm(scenario, m)) for m in ("blind", "event-driven", "subscribed")]
        for other in arms[1:]:
            _ratios(arms[0], other)
        results += arms
    return results
