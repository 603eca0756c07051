"""The `builds.cleanup` actor and the timer that sends it (spec: Limits, registry retention).
The cleanup itself is `calcgraph.builds.retention`'s (the CLI's `builds cleanup` runs it too).

Dramatiq has no scheduler: `RetentionTimer` sends one message every
`retention_interval_seconds` from a worker process; the actor is idempotent (a second run in
the same instant finds nothing more to delete), so two timers only cost a query. It runs no
user code.

Registered in `calcgraph.workers.registry.ACTORS`.
"""

from __future__ import annotations

import logging

import dramatiq

from calcgraph.builds.retention import cleanup
from calcgraph.db.base import utcnow
from calcgraph.domain.jobs.enqueue import Message
from calcgraph.workers.actor import ActorSpec
from calcgraph.workers.broker import send
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sweeper import Timer

CLEANUP_ACTOR = "builds.cleanup"
log = logging.getLogger("calcgraph.builds.retention")


def cleanup_actor(runtime: WorkerRuntime) -> None:
    report = runtime.call(cleanup(runtime.database, runtime.settings, utcnow()))
    for line in report.lines():
        log.info("retention: %s", line)


ACTORS = [ActorSpec(CLEANUP_ACTOR, cleanup_actor, {"time_limit": 15 * 60 * 1000, "max_retries": 0})]


class RetentionTimer(Timer):
    """Sends `builds.cleanup` every `retention_interval_seconds` until stopped (the broker may
    be down for a while: the next interval tries again)."""

    def __init__(self, runtime: WorkerRuntime, broker: dramatiq.Broker) -> None:
        super().__init__(
            runtime, "calcgraph-retention", runtime.settings.retention_interval_seconds
        )
        self.broker = broker

    def tick(self) -> None:
        send(self.broker, Message(CLEANUP_ACTOR, {}))
