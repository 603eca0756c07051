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
import threading
from typing import TYPE_CHECKING

import dramatiq

from calcgraph.builds.retention import cleanup
from calcgraph.db.base import utcnow
from calcgraph.domain.jobs.enqueue import Message
from calcgraph.workers.actor import ActorSpec
from calcgraph.workers.broker import send
from calcgraph.workers.runtime import WorkerRuntime

if TYPE_CHECKING:
    from calcgraph.settings import Settings

CLEANUP_ACTOR = "builds.cleanup"
log = logging.getLogger("calcgraph.builds.retention")


def cleanup_actor(runtime: WorkerRuntime) -> None:
    report = runtime.call(cleanup(runtime.database, runtime.settings, utcnow()))
    for line in report.lines():
        log.info("retention: %s", line)


ACTORS = [ActorSpec(CLEANUP_ACTOR, cleanup_actor, {"time_limit": 15 * 60 * 1000, "max_retries": 0})]


class RetentionTimer:
    """Sends `builds.cleanup` every `retention_interval_seconds` until stopped."""

    def __init__(self, broker: dramatiq.Broker, settings: Settings) -> None:
        self.broker = broker
        self.interval = settings.retention_interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="calcgraph-retention", daemon=True)

    def start(self) -> RetentionTimer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                send(self.broker, Message(CLEANUP_ACTOR, {}))
            except Exception:  # the broker may be down for a while; try next interval
                log.exception("could not send %s", CLEANUP_ACTOR)
