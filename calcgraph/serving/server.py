"""The application as `calcgraph serve` runs it, in each of its processes.

With `--workers N` uvicorn starts N processes of its own (spawned, not forked): each must set
up logging itself before building the app, or its records would go nowhere. Each serves a
`StartingApp`, which answers /health while the application is imported (serving.starting).
"""

from __future__ import annotations

from typing import Any

from calcgraph import heap
from calcgraph.ops.header_limit import HTTP_PROTOCOL
from calcgraph.ops.logs import setup_logging
from calcgraph.serving.starting import StartingApp
from calcgraph.settings import Settings, get_settings


def create_served_app() -> StartingApp:
    heap.pause_until_settled()  # spawned processes too; the application's lifespan settles
    settings = get_settings()
    setup_logging(settings)
    return StartingApp(settings)


def http_options(settings: Settings) -> dict[str, Any]:
    """What every uvicorn that serves calcgraph is given (`serve`, the demo, the bench).

    The keep-alive: uvicorn's default of 5 s equals httpx's own idle limit, so a client that
    polls (a tick every 2 s, from a pool of connections) sent requests on connections the server
    was closing at that very moment, and saw a reset or "Server disconnected without sending a
    response" for a request that never ran (500 polled runs: several per minute, more as the
    server's loop lagged). A server that keeps idle connections longer than its clients do is
    never the one to close them while a request is on its way.
    """
    return {
        # The contract's 431 for oversized headers, before they are read whole.
        "http": HTTP_PROTOCOL,
        "timeout_keep_alive": settings.http_keep_alive_seconds,
    }


def refuse_workers_without_redis(settings: Settings, workers: int) -> None:
    """More than one process needs the state they share to be shared: without Redis each
    would run its own broker, job queue and workers, result cache, job notifications and rate
    limits, and the others' jobs would be invisible to its long-poll waits and sweeper."""
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, not {workers}")
    if workers > 1 and settings.redis_url is None:
        raise ValueError(
            f"--workers {workers} needs CALCGRAPH_REDIS_URL: without Redis each process would "
            "run its own in-process broker, workers, result cache, job notifications and rate "
            "limits, invisible to the others. Set CALCGRAPH_REDIS_URL (and run "
            "`calcgraph worker`), or serve with --workers 1"
        )
