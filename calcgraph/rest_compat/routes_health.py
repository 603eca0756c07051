"""Liveness and readiness."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph import __version__
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import Health
from calcgraph.rest_compat.state import services_of

# A probe polled many times a second reaches the database at most once a second: the answer
# is then at most this old, and /health costs the database nothing most of the time.
HEALTH_PING_MAX_AGE_S = 1.0


async def health(request: Request) -> JSONResponse:
    services = services_of(request)
    database = services.database
    # Without Redis nothing is sent: the API keeps answering (jobs stay queued, the sweeper
    # sends them once it is back), so the platform is degraded, not down.
    redis = await services.probes.redis_reachable()
    extra = {} if redis is None else {"redis": "ok" if redis else "unreachable"}
    try:
        await database.ping(max_age=HEALTH_PING_MAX_AGE_S)
    except Exception:  # readiness reports the failure instead of raising it
        return JSONResponse(
            {"status": "unavailable", "database": "unreachable", "version": __version__, **extra},
            status_code=503,
        )
    status = "degraded" if redis is False else "ok"
    return JSONResponse(
        {"status": status, "database": database.dialect_name, "version": __version__, **extra}
    )


routes = [Route("/health", health, methods=["GET"])]
operations = [
    Operation("GET", "/health", "Liveness and readiness", {200: Health, 503: Health}, tag="meta")
]
