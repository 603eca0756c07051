"""The worker side, assembled once for both ways it runs:

- in the API process, without Redis (`calcgraph serve`: `Execution.start_workers`, from the
  application's lifespan), beside the API on the in-process broker;
- in a worker process of its own, against Redis (`calcgraph worker`: `serve_worker`).

Both are given the `Backbone` (broker, result cache, notifier) the process shares with the
API side. `Workers` is what runs jobs: the runtime (`CodeRuntime`, with sandboxes,
when a declared actor runs code), the actors of `registry.ACTORS` bound to it, Dramatiq's
worker threads, and the timers (sweeper, canary judge, heartbeat, retention).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import dramatiq

from calcgraph.ops.metrics import WorkerMetrics
from calcgraph.settings import Settings
from calcgraph.workers.actor import ActorSpec, declare_actors
from calcgraph.workers.backbone import Backbone
from calcgraph.workers.cancel import CancelWatch
from calcgraph.workers.registry import ACTORS
from calcgraph.workers.retention import RetentionTimer
from calcgraph.workers.runtime import CodeRuntime, WorkerRuntime
from calcgraph.workers.sandbox import SandboxBackend
from calcgraph.workers.sweeper import CanaryJudge, Heartbeat, Sweeper
from calcgraph.workers.webhooks import WebhookTimer

log = logging.getLogger("calcgraph.workers")
# The in-process broker hands messages over a queue.Queue: its worker threads wake at once, so
# this only bounds how long a stop waits for them. Redis: the consumers sleep until a sender
# rings (calcgraph.workers.doorbell), so their wait and the worker threads' only bound a stop
# and the idle consumer's fetch (its heartbeat); `worker_poll_ms` is the poll of a consumer
# holding retries until their eta.
_INPROCESS_POLL_MS = 100
_REDIS_IDLE_MS = 1000


class Workers:
    """Runs the actors of `actors` on `threads` threads until `stop`.

    `own_process`: this is a worker process of its own (`calcgraph worker`), not the API's.
    It then runs Dramatiq's process hooks (the time-limit watcher), fetches only as many
    messages as it has threads, and gives running jobs longer to finish on stop."""

    def __init__(
        self,
        settings: Settings,
        backbone: Backbone,
        *,
        threads: int,
        own_process: bool,
        backend: SandboxBackend | None = None,
        metrics: WorkerMetrics | None = None,
        actors: Sequence[ActorSpec] = ACTORS,
    ) -> None:
        self.settings = settings
        self.broker = backbone.broker
        self.threads = threads
        self.own_process = own_process
        self.actors = actors
        # The sandbox backend and warm pool only for actors that run code.
        self.runtime: WorkerRuntime = (
            CodeRuntime(settings, backbone, metrics, backend=backend)
            if any(spec.runs_code for spec in actors)
            else WorkerRuntime(settings, backbone, metrics)
        )
        self.worker: dramatiq.Worker | None = None
        self.sweeper: Sweeper | None = None
        self.canary_judge: CanaryJudge | None = None
        self.heartbeat: Heartbeat | None = None
        self.retention: RetentionTimer | None = None
        self.webhooks: WebhookTimer | None = None
        self.cancels: CancelWatch | None = None

    def start(self) -> Workers:
        settings, broker = self.settings, self.broker
        declare_actors(broker, self.runtime, self.actors)
        if self.own_process:
            broker.emit_after("process_boot")
        worker = dramatiq.Worker(
            broker,
            worker_threads=self.threads,
            worker_timeout=_INPROCESS_POLL_MS if settings.redis_url is None else _REDIS_IDLE_MS,
        )
        if self.own_process:
            # Fetch only what the threads run: a process killed outright holds no message
            # beyond its running jobs (which the heartbeat hands over); Dramatiq's default of
            # twice the threads would leave the rest with the dead process until Redis' own
            # dead-worker timeout (60 s) requeues them.
            worker.queue_prefetch = self.threads
        worker.start()
        self.worker = worker
        self.sweeper = Sweeper(self.runtime).start()
        self.canary_judge = CanaryJudge(self.runtime).start()
        self.heartbeat = Heartbeat(self.runtime).start()
        # Retention cleanup is idempotent, so a timer in every worker process costs only queries.
        self.retention = RetentionTimer(self.runtime, broker).start()
        # Event fan-out, webhook attempts and event retention (guarded: one timer per process).
        self.webhooks = WebhookTimer(self.runtime).start()
        if isinstance(self.runtime, CodeRuntime):
            self.cancels = CancelWatch(self.runtime, self.runtime.running).start()
        sandbox = self.runtime.backend.name if isinstance(self.runtime, CodeRuntime) else "no"
        log.info(
            "%s: %d threads, %s sandbox",
            "worker ready" if self.own_process else "in-process workers",
            self.threads,
            sandbox,
        )
        return self

    def stop(self) -> None:
        timers = (
            self.webhooks,
            self.retention,
            self.sweeper,
            self.canary_judge,
            self.heartbeat,
            self.cancels,
        )
        for timer in timers:
            if timer is not None:
                timer.stop()
        if self.worker is not None:
            if not self.own_process:
                # Every thread told at once: Dramatiq's stop tells the worker threads, waits
                # for them, then tells the consumers and waits again, each wait up to a poll
                # (0.1 s). In-process there is no Redis heartbeat for the consumers to keep up
                # while jobs finish, and a message a consumer still hands over is requeued.
                for worker_thread in self.worker.workers:
                    worker_thread.stop()
                for consumer in self.worker.consumers.values():
                    consumer.stop()
            self.worker.stop(timeout=30_000 if self.own_process else 10_000)
        # Dramatiq (2.x) has no process-stop hook: its own CLI stops the worker and closes the
        # broker, as `serve_worker` does.
        self.runtime.close()
        self.worker = self.sweeper = self.heartbeat = self.retention = self.cancels = None
        self.canary_judge = None
        self.webhooks = None
