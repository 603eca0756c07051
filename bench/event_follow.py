"""`python -m bench.event_follow BASE_URL TOKEN CURSOR`: the `GET /events?wait=25` follower of
`events_flood_http`, in a process of its own, from CURSOR until it is sent SIGTERM; then it
prints one JSON line: the events it read, the requests it made and its CPU seconds.

In the benchmark's own process the follower parsed the flood's 1,000 events a second on the
loop that timed the ticks and executes beside it: the load generator's own work was counted
as the server's slowdown. It reads with aiohttp: with httpx, its long-poll requests
took a fifth of a core on this 2-core machine (py-spy, 2026-11-29, load 2.7: building requests,
httpcore's pool and sniffio, not the JSON), 14.9-16.3 CPU-s a run of the benchmark; with
aiohttp 3.9-4.3 CPU-s, 0.8 ms of CPU a request in a run that made 5,017 (load 2.4)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

import aiohttp


async def follow(base_url: str, token: str, cursor: str) -> tuple[int, int]:
    seen = asked = 0
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=60.0)
    async with aiohttp.ClientSession(base_url, headers=headers, timeout=timeout) as http:

        async def pages() -> None:
            nonlocal seen, asked, cursor
            while True:
                params = {"after": cursor, "wait": 25, "limit": 500}
                asked += 1
                async with http.get("/events", params=params) as answer:
                    if answer.status == 503:
                        await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
                        continue
                    if answer.status != 200:
                        raise RuntimeError(
                            f"/events answered {answer.status}: {(await answer.text())[:300]}"
                        )
                    page = await answer.json()
                seen += len(page["items"])
                cursor = page["next_cursor"]

        reading = asyncio.create_task(pages())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()
        if reading.done() and not reading.cancelled() and reading.exception() is not None:
            raise reading.exception()  # type: ignore[misc]
    return seen, asked


def main() -> None:
    base_url, token, cursor = sys.argv[1:4]
    seen, asked = asyncio.run(follow(base_url, token, cursor))
    found = {"seen": seen, "requests": asked, "cpu_s": time.process_time()}
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
