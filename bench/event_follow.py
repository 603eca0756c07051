"""`python -m bench.event_follow BASE_URL TOKEN CURSOR`: the `GET /events?wait=25` follower of
`events_flood_http`, in a process of its own, from CURSOR until it is sent SIGTERM; then it
prints one JSON line: the events it read and its CPU seconds.

In the benchmark's own process the follower parsed the flood's 1,000 events a second on the
loop that timed the ticks and executes beside it: the load generator's own work was counted
as the server's slowdown."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

import httpx


async def follow(base_url: str, token: str, cursor: str) -> int:
    seen = 0
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as http:

        async def pages() -> None:
            nonlocal seen, cursor
            while True:
                params = {"after": cursor, "wait": 25, "limit": 500}
                answer = await http.get("/events", params=params, headers=headers)
                if answer.status_code == 503:
                    await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
                    continue
                if answer.status_code != 200:
                    raise RuntimeError(
                        f"/events answered {answer.status_code}: {answer.text[:300]}"
                    )
                page = answer.json()
                seen += len(page["items"])
                cursor = page["next_cursor"]

        reading = asyncio.create_task(pages())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()
        if reading.done() and not reading.cancelled() and reading.exception() is not None:
            raise reading.exception()  # type: ignore[misc]
    return seen


def main() -> None:
    base_url, token, cursor = sys.argv[1:4]
    seen = asyncio.run(follow(base_url, token, cursor))
    print(json.dumps({"seen": seen, "cpu_s": time.process_time()}), flush=True)


if __name__ == "__main__":
    main()
