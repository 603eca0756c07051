"""The use cases that commit, then wait, as both doors call them. Each owns its unit of work
(one write transaction, committed before any wait, so its messages have left) and its wait
(bounded by `waits`, holding no transaction); a door parses, calls one method, serialises.

- `execute`: submit a job (or answer it from the result cache), then wait for its result.
- `tick`: wait until a job of the run finishes (a long-poll), then tick the run once.
- `follow`: the `runUpdates` subscription: the run's shared ticking loop, woken by its jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.commit_wait.ports import Notifications, ResultLookup
from calcgraph.domain.commit_wait.waiting import (
    RunTickers,
    Updates,
    unfinished,
    wait_for_job,
    wait_for_run,
)
from calcgraph.domain.commit_wait.waits import EXECUTE_WAIT, FOLLOW_INTERVAL, TICK_WAIT, Where
from calcgraph.domain.jobs.cache_key import REFRESH
from calcgraph.domain.jobs.submission.service import job_submission_service
from calcgraph.domain.jobs.views import TERMINAL, Executed, JobView
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.runs.changes import RunChanges
from calcgraph.domain.runs.service import Advance, run_service
from calcgraph.domain.runs.views import RunView

if TYPE_CHECKING:
    from calcgraph.db.engine import Database

WAIT: Where = ("wait",)


class CommitWait:
    """Not a service (those are module singletons taking the caller's session): it opens and
    commits its own units of work and waits between them, so it is built once per process with
    the adapters it waits on, and the doors reach it as `Services.execution`."""

    def __init__(
        self,
        database: Database,
        cache: ResultLookup,
        notifications: Notifications,
        *,
        execute_max_wait: float,
        chains: bool = False,
        tick_timer: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
        quotas: Quotas | None = None,
        changes: RunChanges | None = None,
    ) -> None:
        self.database = database
        self.cache = cache
        self.notifications = notifications
        self.execute_wait = EXECUTE_WAIT.capped_at(execute_max_wait)
        self.tick_timer = tick_timer
        """Times each tick's unit of work (/metrics)."""
        self.quotas = quotas or Quotas()
        """Per-user quotas asked before a job is submitted (`CALCGRAPH_LIMIT_*`)."""
        self.advance = Advance(cache, chains=chains, quotas=self.quotas)
        """What each tick asks (`RunService.answer`); with `chains`, it submits a chain's
        remaining nodes as one chain job (`chain_execution`)."""
        self.tickers = RunTickers()
        """At most one ticking loop per followed run in this process."""
        self.changes = changes
        """The runs' change tokens: a tick that finds its run's token unchanged since a tick
        that changed nothing answers what that tick answered (None: every tick reads)."""

    async def execute(
        self,
        principal: Principal,
        address: ExecuteAddress,
        inputs: object,
        wait: float | None = None,
        *,
        where: Where = WAIT,
        refresh: bool = False,
    ) -> Executed:
        """The job, finished, or as it stands once `wait` seconds (default 30, capped by the
        operator) have passed. `refresh`: never answered from the result cache (the job runs
        and its worker stores the new result)."""
        seconds = self.execute_wait.seconds(wait, where)
        async with self.database.write_session() as session:
            await quota_service.require_job_room(session, principal, self.quotas)
            submitted = await job_submission_service.submit_call(
                session, principal, address, inputs, REFRESH if refresh else self.cache
            )
        job = submitted.job
        if job.status in TERMINAL or seconds <= 0:
            return submitted

        async def read() -> JobView:
            async with self.database.read_session() as session:
                return await job_submission_service.view(session, job.id)

        # Submitted just now: its notification cannot have been missed (`fresh`).
        finished = await wait_for_job(self.notifications, job.id, seconds, read, fresh=True)
        return Executed(finished, submitted.deprecation)

    async def tick(
        self,
        principal: Principal,
        run_id: str,
        wait: float | None = None,
        *,
        since: int | None = None,
        where: Where = WAIT,
    ) -> RunView:
        """With `wait`, first until a job of the run finishes (or `wait` seconds pass); then
        the tick's one unit of work, commit included, timed. `since`: only the node states
        changed after that revision. A tick that would change nothing (most of a polled run's
        ticks) is answered without the database when the run's change token is the one a tick
        that changed nothing saw (no unit of work changed the run since), else from one read,
        without a write transaction or the run's lock."""
        seconds = TICK_WAIT.seconds(wait, where)
        if seconds > 0:
            await self._wait_for_run(principal, run_id, seconds)
        with self.tick_timer():
            # Read before the database is: a change committed after this read renews it.
            token = None if self.changes is None else await self.changes.token(run_id)
            view = None if token is None else run_service.kept(principal, run_id, token, since)
            if view is not None:
                return view
            memo = run_service.memo
            if not memo.expects_work(run_id, token):
                # Without the run's lock or a write transaction: answered so when its tick
                # would change nothing.
                async with self.database.read_session() as session:
                    view = await run_service.answer(
                        session, principal, run_id, since=since, token=token
                    )
            if view is None:
                # The tick, under the run's lock, in a write transaction.
                async with self.database.write_session() as session:
                    view = await run_service.answer(
                        session, principal, run_id, since=since, token=token, advance=self.advance
                    )
                assert view is not None  # a tick always answers
            if token is None and self.changes is not None:
                # A run without a token (none marked since the store began, or forgotten)
                # gets one once it is known to exist: the next tick's read can be kept.
                await self.changes.issue(run_id)
            elif self.changes is not None:
                # When this tick changed the run, its commit renewed the token: noted, the
                # next tick goes straight to the run's lock when a job's end renewed it again,
                # without the unlocked read that would only find that work first. The token
                # the commit's mark set, without a round trip.
                memo.note_token(run_id, self.changes.marked(run_id))
            return view

    @contextlib.asynccontextmanager
    async def follow(
        self, principal: Principal, run_id: str, interval: float | None = None
    ) -> AsyncIterator[Updates]:
        """The run's states as its shared ticking loop pushes them (None: the loop ended),
        ticked every `interval` seconds and sooner when one of its jobs finishes, until the
        caller's token expires (then Unauthenticated, and its caller ticks no more)."""
        every = FOLLOW_INTERVAL.seconds(interval, ("interval",))
        async with self.database.read_session() as session:
            await run_service.get(session, principal, run_id)  # access, before any loop starts

        async def tick() -> RunView:
            principal.require_current()
            return await self.tick(principal, run_id)

        async def wait(seconds: float) -> None:
            await self._wait_for_run(principal, run_id, seconds)

        async with self.tickers.subscribe(run_id, every, tick, wait) as queue:
            yield Updates(queue, principal)

    async def _wait_for_run(self, principal: Principal, run_id: str, seconds: float) -> None:
        async def running() -> list[str] | None:
            async with self.database.read_session() as session:
                return unfinished(await run_service.running_jobs(session, principal, run_id))

        async def read() -> list[str] | None:
            # A wait is cancelled whenever its caller leaves (a subscription's last page
            # closed, a long-polling client gone): its read is left to end on its own, since a
            # statement cancelled mid-way on PostgreSQL costs its pooled connection (asyncpg
            # closes it) and logs the closed connection's error at ERROR.
            reading = asyncio.ensure_future(running())
            try:
                return await asyncio.shield(reading)
            except asyncio.CancelledError:
                # Nobody takes its answer now: its failure, if any, is not an incident.
                reading.add_done_callback(lambda done: done.cancelled() or done.exception())
                raise

        await wait_for_run(self.notifications, read, seconds)
