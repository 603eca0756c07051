"""Stopping cancelled jobs (contract section 10): the sandboxes a worker process is running
jobs on, and the timer that kills those whose job was cancelled.

A cancel (`POST /workflow-runs/{id}/cancel`, `POST /jobs/{id}/cancel`) is a database write: the
job rows become `failed` (kind `cancelled`), the run `cancelled`. It reaches the process running
the job, this one or another host's, through the database, as the sweeper's work does: every
`job_cancel_check_seconds` the `CancelWatch` asks, in one statement by primary key, which of
the jobs this process runs no longer run (their rows say so), and which runs among theirs were
cancelled (a chain's link whose row the chain has not written yet). Each such job's sandbox is
killed (`Sandbox.close`, from this thread: the job's own thread finds its channel closed) and
never given back to the warm pool; the job's result is `cancelled` and is not recorded (its
row ended already). A chain whose job was stopped records nothing more and ends.
"""

from __future__ import annotations

import logging

from calcgraph.domain.runs.control.service import run_control
from calcgraph.workers.running import Running
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sweeper import Timer

log = logging.getLogger("calcgraph.workers.cancel")


class CancelWatch(Timer):
    def __init__(self, runtime: WorkerRuntime, running: Running) -> None:
        super().__init__(runtime, "calcgraph-cancel", runtime.settings.job_cancel_check_seconds)
        self.running = running

    def tick(self) -> int:
        jobs = self.running.snapshot()
        if not jobs:
            return 0
        stopped = self.runtime.call(self._stopped(jobs))
        if not stopped:
            return 0
        count = self.running.stop(stopped)
        log.info("killed the sandboxes of %d cancelled job(s)", count)
        return count

    async def _stopped(self, jobs: dict[str, str | None]) -> set[str]:
        async with self.runtime.database.read_session() as session:
            return await run_control.stopped(session, jobs)
