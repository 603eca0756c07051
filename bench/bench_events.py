"""Events (issue 23, contract section 9), end to end: real HTTP through uvicorn (`calcgraph
serve`, its own process, in-process workers, process sandbox, PostgreSQL), a real RS256 token.

- `events_delivery_http`: diamond runs kept going (`RUNS_AT_ONCE` at a time, each driven by
  long-poll ticks) for `PHASE_S` seconds while one consumer follows `GET /events?wait=25`
  (type `calcgraph.job.succeeded`) and a webhook for the same type posts to a receiver on
  loopback (`CALCGRAPH_WEBHOOK_ALLOWED_HOSTS=127.0.0.1`, the default dispatch interval).
  Figures: events recorded per second (every type, counted from the log afterwards), the delay
  from a job finishing (its event's `time`, written in the unit of work that finishes the job)
  to (a) the long-poll answering with it and (b) the receiver getting it, p50/p99, the server's
  CPU per recorded event and the load average.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from bench.core import Options, Result, summarise
from bench.scale_client import Api, api, cpu_seconds, diamond_nodes, load1
from calcgraph.settings import Settings
from tests.events.receiver import receiver

PHASE_S = 20.0
RUNS_AT_ONCE = 4
JOB_SUCCEEDED = "calcgraph.job.succeeded"
DISPATCH_S = Settings.model_fields["webhook_dispatch_interval_seconds"].default
_ENV = {"CALCGRAPH_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Settings the served process inherits, for this benchmark only."""
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


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


async def _events(bench: Api, **params: Any) -> dict[str, Any]:
    response = await bench.http.get("/events", params=params, headers=bench.headers)
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


def delivery(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        with _environment(_ENV), receiver() as hooks:
            async with api(postgres=True) as bench:
                created = await bench.http.post(
                    "/webhooks",
                    json={"url": hooks.url, "types": [JOB_SUCCEEDED]},
                    headers=bench.headers,
                )
                if created.status_code != 201:
                    raise RuntimeError(f"webhook refused: {created.text[:300]}")
                slug = await bench.workflow(diamond_nodes(bench))
                start = (await _events(bench, after="now"))["next_cursor"]
                polled: dict[str, tuple[float, float]] = {}  # event id -> (time, answered)
                stop = asyncio.Event()

                async def follow() -> None:
                    cursor = start
                    while not stop.is_set():
                        page = await _events(bench, after=cursor, wait=25, type=JOB_SUCCEEDED)
                        answered = time.time()
                        for event in page["items"]:
                            polled[event["id"]] = (_epoch(event["time"]), answered)
                        cursor = page["next_cursor"]

                completed = 0

                async def runs() -> None:
                    nonlocal completed
                    while not stop.is_set():
                        await bench.run_to_end(slug, random.uniform(0, 1e6), limit_s=120)
                        completed += 1

                follower = asyncio.create_task(follow())
                await asyncio.sleep(0.5)  # the follower is waiting
                before, t0 = cpu_seconds(bench.pid), time.perf_counter()
                drivers = [asyncio.create_task(runs()) for _ in range(RUNS_AT_ONCE)]
                await asyncio.sleep(PHASE_S)
                stop.set()
                await asyncio.gather(*drivers)
                elapsed = time.perf_counter() - t0
                cpu = cpu_seconds(bench.pid) - before
                recorded = await _count_since(bench, start)
                # The last jobs' events reach the follower and the receiver.
                await asyncio.sleep(3.0)
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
                with hooks.arrived:
                    received = list(hooks.received)
                hooked: dict[str, float] = {}
                for got in received:
                    hooked.setdefault(got.headers["webhook-id"], got.at)
                poll_ns = [int((a - t) * 1e9) for t, a in polled.values()]
                hook_ns = [
                    int((hooked[i] - t) * 1e9) for i, (t, _) in polled.items() if i in hooked
                ]
                missing = len(set(polled) - set(hooked))
                extra = {
                    "events_recorded": recorded,
                    "events_per_s": round(recorded / elapsed, 1),
                    "diamond_runs_completed": completed,
                    "server_cpu_ms_per_event": round(cpu / max(1, recorded) * 1000, 3),
                    "load1": load1(),
                    "loadavg": [round(x, 2) for x in os.getloadavg()],
                }
                setup = f"{bench.setup}, {RUNS_AT_ONCE} diamond runs at once for {PHASE_S:g} s"
                return [
                    summarise(
                        "events_delivery_http",
                        "job finished -> GET /events?wait=25 answers",
                        setup,
                        poll_ns,
                        elapsed,
                        extra=extra,
                    ),
                    summarise(
                        "events_delivery_http",
                        "job finished -> webhook receiver on loopback gets it",
                        f"{setup}, dispatch every {DISPATCH_S:g} s",
                        hook_ns,
                        elapsed,
                        errors=missing,
                        extra={"not_received": missing, "load1": load1()},
                    ),
                ]

    return asyncio.run(run())


BENCHMARKS = {"events_delivery_http": delivery}
