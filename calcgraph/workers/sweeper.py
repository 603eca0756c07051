"""A worker process's two timers against the job store.

`Heartbeat`: every `job_heartbeat_seconds`, one UPDATE renews `heartbeat_at` of every job the
process runs (by their leases), however many: the sign of life the sweeper reads.

`Sweeper`: every `sweeper_interval_seconds`, one guarded round (`JobSweepService.sweep`):
hands a running job whose heartbeat stopped for `job_heartbeat_timeout_seconds` to another
worker, re-sends a queued job whose message the broker no longer holds, and leaves alone a job
whose message merely waits in the queue.

`CanaryJudge`: at the sweeper's interval, but at least every `JUDGE_INTERVAL_SECONDS` (5 s)
whatever that interval is set to, judges the canary deployments that are due
(`CanaryService.judge`) in a unit of work of its own, so a canary ends within 10 s of becoming
due (contract 11) on every deployment shape (in-process workers, or each `calcgraph worker`
process: each judge tries, one wins each canary); a failing job-store round cannot delay it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Self

from calcgraph.domain.jobs.enqueue import RUN_ACTOR
from calcgraph.domain.jobs.store.service import job_store_service
from calcgraph.domain.jobs.sweep.service import job_sweep_service
from calcgraph.domain.packages import canary_rules
from calcgraph.domain.packages.canary.service import Decision, canary_service
from calcgraph.domain.runs.chains.service import CHAIN_ACTOR
from calcgraph.workers.broker import waiting
from calcgraph.workers.runtime import WorkerRuntime

log = logging.getLogger("calcgraph.workers")


class Timer:
    """A daemon thread of the worker `runtime` that calls `tick` every `interval` seconds
    (a setting's value); a failed tick is logged and the next one comes as usual."""

    def __init__(self, runtime: WorkerRuntime, name: str, interval: float) -> None:
        self.runtime = runtime
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def tick(self) -> Any:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:
                log.exception("%s failed; it tries again in %s s", self._thread.name, self.interval)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


class Heartbeat(Timer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime, "calcgraph-heartbeat", runtime.settings.job_heartbeat_seconds)

    def tick(self) -> int:
        leases = self.runtime.leases.snapshot()
        if not leases:
            return 0
        return self.runtime.call(self._beat(leases))

    async def _beat(self, leases: list[str]) -> int:
        async with self.runtime.database.write_session() as session:
            return await job_store_service.heartbeat(session, leases)


class Sweeper(Timer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime, "calcgraph-sweeper", runtime.settings.sweeper_interval_seconds)

    def tick(self) -> Any:
        return self.runtime.call(self._sweep())

    async def _sweep(self) -> Any:
        settings = self.runtime.settings
        broker = self.runtime.broker
        async with self.runtime.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=settings.sweeper_stale_seconds,
                max_deliveries=settings.sweeper_max_deliveries,
                # A running job with no heartbeat (claimed by an older worker) older than the
                # execution timeout plus a grace lost its worker.
                stuck_after=settings.sandbox_timeout_seconds + 120,
                heartbeat_timeout=settings.job_heartbeat_timeout_seconds,
                waiting=lambda ids: waiting(broker, ids, settings.job_max_retries),
                node_actor=CHAIN_ACTOR if settings.chain_execution == "chain" else RUN_ACTOR,
            )
        if report.resent or report.handed_over or report.given_up or report.stuck:
            log.warning(
                "sweeper: handed over %d, re-sent %d (%d still waiting), gave up %d, "
                "failed %d stuck",
                len(report.handed_over),
                len(report.resent),
                report.waiting,
                len(report.given_up),
                len(report.stuck),
            )
        for job_id in [*report.given_up, *report.stuck]:
            self.runtime.notifier.publish(job_id)
        return report


class CanaryJudge(Timer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        interval = min(
            runtime.settings.sweeper_interval_seconds, canary_rules.JUDGE_INTERVAL_SECONDS
        )
        super().__init__(runtime, "calcgraph-canary-judge", interval)

    def tick(self) -> list[Decision]:
        return self.runtime.call(self._judge())

    async def _judge(self) -> list[Decision]:
        """Canary deployments due (or failing early) are promoted or rolled back here, in
        their own unit of work: every worker process's judge tries, one wins each."""
        async with self.runtime.database.write_session() as session:
            decisions = await canary_service.judge(session)
        for decision in decisions:
            log.info(
                "canary of %s %s %s: %s",
                decision.package,
                decision.candidate,
                decision.action.replace("_", " "),
                decision.reason,
            )
        return decisions
