"""Liveness and readiness."""

from __future__ import annotations

from calcgraph.ops.health import readiness
from calcgraph.rest_compat.operations import Call, Operations, Reply
from calcgraph.rest_compat.wire_health import Health

rest = Operations(tag="meta")


@rest("GET", "/health", {200: Health, 503: Health})
async def health(call: Call[None, None]) -> Reply:
    # The same answer as a starting server's early /health (serving.starting), from one module.
    """Liveness and readiness"""
    status, body = await readiness(call.database, call.services.probes.redis_reachable)
    return Reply(status, Health.model_validate(body))
