"""The answer of the health route."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from calcgraph.rest_compat.wire import Out, is_none


class Health(Out):
    status: Literal["ok", "degraded", "unavailable"]
    """`degraded`: the database answers, Redis does not (jobs wait queued until it is back)."""
    database: str
    version: str
    redis: Literal["ok", "unreachable"] | None = Field(default=None, exclude_if=is_none)
    """Only with `CALCGRAPH_REDIS_URL`."""
