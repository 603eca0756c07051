"""Each user's share of a serve process's time (contract 8b: one user must not take the shared
capacity). One event loop serves every caller of the process, first come first served: a user
whose every request costs a second of it (12,000-node runs started back to back, 8 MiB answers
read over and over, documents built to be expensive) took most of it in the soak of issue 27,
however few requests it had in flight, and everyone else's requests waited behind its work.

So each authenticated request is metered: the CPU time of its own steps on the loop, plus the
wall time of what it sends to a thread (domain.spend.off_loop). A user's use is kept as a
debt that is paid back at `CALCGRAPH_LIMIT_SERVER_SECONDS_PER_MINUTE` / 60 per second; a user
whose debt is over a quarter of that (the burst a single costly request may take) is answered
429 `QuotaExceeded` with the `Retry-After` that pays it back, before anything else is done for
the request, while another user has a request in flight in this process: a share is what one
leaves to the others, and a user alone may use the whole process (one user's 10,000-node run
ticked to its end, an operator's benchmark). Per process, in memory. A user whose requests
are ordinary (a tick costs milliseconds) never comes near it; work the request's own task does
not run (concurrent GraphQL resolvers in tasks of their own, rows decoded as they arrive) goes
unmetered, but for the JSON values read on PostgreSQL, whose decoding is charged to the request
that checked out the connection (db.engine, `charged`)."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Generator
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.spend import METER, Meter
from calcgraph.serving.inflight import PerUserLimit, UserCounts

BURST_SHARE = 0.25
"""The debt a user may run up at once, as a share of the minute's allowance."""
_MAX_USERS = 10_000


class _Metered:
    """Awaits an awaitable, adding the thread CPU time of each of its steps to `meter`."""

    __slots__ = ("_awaitable", "_meter")

    def __init__(self, awaitable: Awaitable[None], meter: Meter) -> None:
        self._awaitable = awaitable
        self._meter = meter

    def __await__(self) -> Generator[Any, Any, None]:
        coroutine, meter = self._awaitable.__await__(), self._meter
        value: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.thread_time()
            try:
                if thrown is None:
                    yielded = coroutine.send(value)
                else:
                    error, thrown = thrown, None
                    yielded = coroutine.throw(error)
            except StopIteration:
                meter.spent += time.thread_time() - started
                return
            except BaseException:
                meter.spent += time.thread_time() - started
                raise
            meter.spent += time.thread_time() - started
            try:
                value = yield yielded
            except BaseException as error:  # cancellation, thrown into the request
                thrown, value = error, None


class LoopShareMiddleware(PerUserLimit):
    def __init__(self, app: ASGIApp, per_minute: float) -> None:
        super().__init__(app)
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.burst = per_minute * BURST_SHARE
        self.debts: dict[str, tuple[float, float]] = {}
        """Per user subject: (seconds owed, when that was last worked out, monotonic)."""
        self.active = UserCounts()
        """Per user subject: its requests in flight past this middleware."""

    def debt(self, subject: str, now: float) -> float:
        owed, at = self.debts.get(subject, (0.0, now))
        return max(0.0, owed - (now - at) * self.rate)

    def off(self) -> bool:
        return self.per_minute == 0

    def refusal(self, principal: Principal) -> tuple[str, int] | None:
        subject = principal.subject
        owed = self.debt(subject, time.monotonic())
        if owed <= self.burst or self.active.others(subject) == 0:
            return None
        return (
            f"user {principal.username} used {owed:.1f} s more of this server's time than "
            f"its share, {self.per_minute:g} s per minute "
            f"(CALCGRAPH_LIMIT_SERVER_SECONDS_PER_MINUTE)",
            max(1, math.ceil((owed - self.burst) / self.rate)),
        )

    async def admit(self, principal: Principal, scope: Scope, receive: Receive, send: Send) -> None:
        subject = principal.subject
        meter = Meter()
        token = METER.set(meter)
        try:
            with self.active.holding(subject):
                await _Metered(self.app(scope, receive, send), meter)
        finally:
            METER.reset(token)
            self.spent(subject, meter.spent)

    def spent(self, subject: str, seconds: float) -> None:
        now = time.monotonic()
        self.debts[subject] = (self.debt(subject, now) + seconds, now)
        if len(self.debts) > _MAX_USERS:  # forget the users who owe nothing any more
            for key in [k for k in self.debts if self.debt(k, now) == 0.0]:
                del self.debts[key]
