"""`python -m bench.event_flood PREFIX USER_ID SECONDS [START_AT | -]`: the flood of
`events_flood_http`, in a process of its own, from the wall clock's START_AT, or (`-`) from
the line its standard input gets once it has printed `ready` (imported, connected).

`FLOOD_PER_S` `calcgraph.user.login` events of USER_ID a second for SECONDS, recorded by the
product's `record_rows` in `FLOOD_UNITS_PER_S` units of work a second whose hook numbers them
and publishes through Redis (key prefix PREFIX), as another server's would, against the
benchmark's PostgreSQL. Prints one JSON line: the events recorded, the seconds it took, and
this process's CPU seconds, in all and while flooding.

The benchmark starts it with `-` and begins its phase when it says `ready`: started a fixed
3 s ahead instead, at niceness 10 on a busy machine its start (imports and connections, about
1.2 CPU-s, most of what it costs) ran up to 5 s into the phase it was to stand beside.

Run inside the benchmark's own process the generator shared its one core (and its GIL) with the
load it was meant to stand beside, and reached 419 events a second, not 1,000; its CPU was
counted with the load generator's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable

from sqlalchemy import text

from bench.bench_scale_tick import REDIS_URL
from bench.scale_client import POSTGRES_URL
from calcgraph.db.engine import Database
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.service import event_row, record_rows
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.notify import RedisNotifier

FLOOD_PER_S = 1000
FLOOD_UNITS_PER_S = 20


async def flood(
    prefix: str,
    user_id: str,
    seconds: float,
    start_at: float = 0.0,
    go: Callable[[], Awaitable[object]] | None = None,
) -> tuple[int, float, float]:
    """(events recorded, seconds taken, CPU seconds while flooding), flooding from the wall
    clock's `start_at`, or once `go()` returns (this process's start and its connections made
    before, outside the flood's seconds)."""
    database = Database(POSTGRES_URL)
    notifier = RedisNotifier(REDIS_URL, prefix)
    attach_signal(database, notifier)
    async with database.read_session() as session:
        await session.execute(text("SELECT 1"))
    if go is not None:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await go()
    else:
        await asyncio.sleep(max(0.0, start_at - time.time()))
    cpu_at_start = sum(os.times()[:2])
    per_unit = FLOOD_PER_S // FLOOD_UNITS_PER_S
    recorded = 0
    loop = asyncio.get_running_loop()
    started = next_at = loop.time()
    try:
        while loop.time() - started < seconds:
            rows = [
                event_row(USER_LOGIN, user_id, {"username": "alice", "flood": recorded + i})
                for i in range(per_unit)
            ]
            async with database.write_session() as session:
                await record_rows(session, rows)
            recorded += per_unit
            next_at += 1 / FLOOD_UNITS_PER_S
            await asyncio.sleep(max(0.0, next_at - loop.time()))
        took = loop.time() - started
        flooding_cpu = sum(os.times()[:2]) - cpu_at_start
    finally:
        await notifier.close()
        await database.dispose()
    return recorded, took, flooding_cpu


def main(argv: list[str]) -> None:
    prefix, user_id, seconds = argv[0], argv[1], float(argv[2])
    told = len(argv) > 3 and argv[3] == "-"
    start_at = float(argv[3]) if len(argv) > 3 and not told else 0.0

    async def go() -> str:
        return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    recorded, took, flooding_cpu = asyncio.run(
        flood(prefix, user_id, seconds, start_at, go if told else None)
    )
    cpu = sum(os.times()[:2])
    found = {
        "recorded": recorded,
        "seconds": round(took, 3),
        "cpu_s": round(cpu, 3),
        "flooding_cpu_s": round(flooding_cpu, 3),
    }
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
