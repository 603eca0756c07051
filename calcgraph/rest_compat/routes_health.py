"""Liveness and readiness."""

from __future__ import annotations

from calcgraph import __version__
from calcgraph.rest_compat.operations import Call, Operations, Reply
from calcgraph.rest_compat.responses import Health
from calcgraph.workers.inprocess import Execution

# A probe polled many times a second reaches the database at most once a second: the answer
# is then at most this old, and /health costs the database nothing most of the time.
HEALTH_PING_MAX_AGE_S = 1.0

rest = Operations(tag="meta")


@rest("GET", "/health", "Liveness and readiness", {200: Health, 503: Health})
async def health(call: Call[None, None]) -> Reply:
    database = call.database
    execution: Execution = call.request.app.state.execution
    # Without Redis nothing is sent: the API keeps answering (jobs stay queued, the sweeper
    # sends them once it is back), so the platform is degraded, not down.
    reachable = await execution.redis_reachable()
    redis = None if reachable is None else "ok" if reachable else "unreachable"
    try:
        await database.ping(max_age=HEALTH_PING_MAX_AGE_S)
    except Exception:  # readiness reports the failure instead of raising it
        return Reply(
            503,
            Health(status="unavailable", database="unreachable", version=__version__, redis=redis),
        )
    status = "degraded" if reachable is False else "ok"
    return Reply(
        200, Health(status=status, database=database.dialect_name, version=__version__, redis=redis)
    )
