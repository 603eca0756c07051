"""What /health answers: liveness and readiness, from the database and (when configured) Redis.

Its own light module: a starting server answers /health with it before the application is
imported (serving.starting), and the application's route answers with it afterwards, so both give
the same answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from calcgraph import __version__
from calcgraph.db.engine import Database

# A probe polled many times a second reaches the database at most once a second: the answer
# is then at most this old, and /health costs the database nothing most of the time.
HEALTH_PING_MAX_AGE_S = 1.0


async def readiness(
    database: Database, redis_reachable: Callable[[], Awaitable[bool | None]]
) -> tuple[int, dict[str, Any]]:
    """The status code and body of /health. `redis_reachable` is None without Redis."""
    # Without Redis nothing is sent: the API keeps answering (jobs stay queued, the sweeper
    # sends them once it is back), so the platform is degraded, not down.
    redis = await redis_reachable()
    extra = {} if redis is None else {"redis": "ok" if redis else "unreachable"}
    try:
        await database.ping(max_age=HEALTH_PING_MAX_AGE_S)
    except Exception:  # readiness reports the failure instead of raising it
        return 503, {
            "status": "unavailable",
            "database": "unreachable",
            "version": __version__,
            **extra,
        }
    status = "degraded" if redis is False else "ok"
    body = {"status": status, "database": database.dialect_name, "version": __version__}
    return 200, {**body, **extra}
