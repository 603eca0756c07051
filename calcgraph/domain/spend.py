"""What one request spends of its serve process (contract 8b: one user must not take the
shared capacity). The serving layer meters each authenticated request's own steps on the event
loop (serving.loop_share); work a request sends to a thread (planning a huge graph, writing a
large answer) holds the interpreter much of that time, so it is charged too, through
`off_loop`, to whichever request is being served in this context."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


class Meter:
    """Seconds one request has used so far."""

    __slots__ = ("spent",)

    def __init__(self) -> None:
        self.spent = 0.0


METER: ContextVar[Meter | None] = ContextVar("calcgraph_request_meter", default=None)


def charge(seconds: float) -> None:
    meter = METER.get()
    if meter is not None:
        meter.spent += seconds


async def off_loop(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` on a thread, its wall time charged to the request being served."""
    started = time.perf_counter()
    try:
        return await asyncio.to_thread(function, *args)
    finally:
        charge(time.perf_counter() - started)


OFF_LOOP_NODES = 500
"""A graph with more nodes is validated, and a workflow version's is parsed and planned, on a
thread rather than the event loop (`off_loop`); a smaller one in place, where a thread hop
would cost more than its work."""
