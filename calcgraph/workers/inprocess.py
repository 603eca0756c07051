"""Execution as the API process sees it: the broker it sends to, the result cache it reads,
the notifier it waits on; and, with no Redis configured, the in-process workers themselves
(started by `serve`'s lifespan, so one command gives a working platform)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

import dramatiq
from dramatiq.brokers.stub import StubBroker

from calcgraph.builds.retention_actor import RetentionTimer
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.jobs.enqueue import Message
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.views import RunView
from calcgraph.ops.metrics import Metrics
from calcgraph.settings import Settings
from calcgraph.workers.broker import QUEUE, build_broker, declare_actors, send, send_many
from calcgraph.workers.flush import attach
from calcgraph.workers.notify import LocalNotifier, Notifier, RedisNotifier, wait_for_job
from calcgraph.workers.result_cache import InProcessResultCache, RedisResultCache, ResultCache
from calcgraph.workers.run_wait import wait_for_run
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sandbox import SandboxBackend
from calcgraph.workers.sweeper import Heartbeat, Sweeper

log = logging.getLogger("calcgraph.workers")
# The in-process broker hands messages over a queue.Queue: its worker threads wake at once, so
# this only bounds how long a stop waits for them.
_INPROCESS_POLL_MS = 100
_REDIS_PROBE_SECONDS = 1.0


def build_cache_and_notifier(settings: Settings) -> tuple[ResultCache, Notifier]:
    if settings.redis_url is not None:
        url = settings.redis_url.get_secret_value()
        prefix = settings.redis_key_prefix
        return (
            RedisResultCache(url, settings.result_cache_ttl_seconds, prefix),
            RedisNotifier(url, prefix),
        )
    return InProcessResultCache(settings.result_cache_ttl_seconds), LocalNotifier()


class Execution:
    def __init__(
        self, settings: Settings, database: Database, metrics: Metrics | None = None
    ) -> None:
        self.settings = settings
        self.database = database
        self.metrics = metrics if metrics is not None else Metrics()
        self.broker = build_broker(settings)
        self.cache, self.notifier = build_cache_and_notifier(settings)
        self.metrics.watch(cache=self.cache)
        # Through Redis, a tick's response does not wait for its messages: they leave in a
        # thread while it is answered (a tick submitting 1,000 jobs spent 90 ms sending).
        self.outbox = attach(
            database,
            self.send,
            self.send_many,
            off_loop=not self.in_process,
            detach=not self.in_process,
        )
        self.runtime: WorkerRuntime | None = None
        self.worker: dramatiq.Worker | None = None
        self.sweeper: Sweeper | None = None
        self.heartbeat: Heartbeat | None = None
        self._redis_seen: tuple[float, bool] | None = None
        self.retention: RetentionTimer | None = None

    @property
    def chains(self) -> bool:
        """Ticks submit a chain's remaining nodes as one chain job (`chain_execution`)."""
        return self.settings.chain_execution == "chain"

    @property
    def in_process(self) -> bool:
        return self.settings.redis_url is None

    def send(self, message: Message) -> None:
        send(self.broker, message)

    def send_many(self, messages: Sequence[Message]) -> int:
        return send_many(self.broker, messages)

    def start_workers(self, backend: SandboxBackend | None = None) -> WorkerRuntime:
        """Run the workers in this process (the embedded setup, and tests)."""
        runtime = WorkerRuntime(
            self.settings,
            broker=self.broker,
            cache=self.cache,
            notifier=self.notifier,
            backend=backend,
            metrics=self.metrics,
        )
        declare_actors(self.broker, runtime)
        worker = dramatiq.Worker(
            self.broker,
            worker_threads=self.settings.inprocess_worker_threads,
            worker_timeout=_INPROCESS_POLL_MS if self.in_process else self.settings.worker_poll_ms,
        )
        worker.start()
        self.runtime, self.worker = runtime, worker
        self.sweeper = Sweeper(runtime).start()
        self.heartbeat = Heartbeat(runtime).start()
        self.retention = RetentionTimer(self.broker, self.settings).start()
        log.info(
            "in-process workers: %d threads, %s sandbox",
            self.settings.inprocess_worker_threads,
            runtime.backend.name,
        )
        return runtime

    async def redis_reachable(self) -> bool | None:
        """Whether Redis answers (asked at most once a second); None without Redis
        (`/health`)."""
        if not isinstance(self.cache, RedisResultCache):
            return None
        now = asyncio.get_running_loop().time()
        if self._redis_seen is None or now - self._redis_seen[0] > _REDIS_PROBE_SECONDS:
            self._redis_seen = (now, await self.cache.ping())
        return self._redis_seen[1]

    async def queue_length(self) -> int | None:
        """Messages waiting in the broker's job queue (/metrics); None while Redis is down."""
        if isinstance(self.broker, StubBroker):
            return int(self.broker.queues[QUEUE].qsize())
        # Redis: Dramatiq's own queue-size command, a blocking call.
        try:
            size = await asyncio.to_thread(self.broker.do_qsize, QUEUE)  # type: ignore[attr-defined]
        except Exception as exc:  # redis.RedisError, OSError: /metrics still answers
            log.warning("the broker's queue length is unknown: %s", exc)
            return None
        return int(size)

    async def wait(
        self, job_id: str, seconds: float, read: Callable[[], Awaitable[JobView]]
    ) -> JobView:
        """Wait for a job submitted just now (the execute doors, right after their commit)."""
        return await wait_for_job(self.notifier, job_id, seconds, read, fresh=True)

    async def tick(
        self, principal: Principal, run_id: str, wait: float = 0.0, *, since: int | None = None
    ) -> RunView:
        """A tick as every door drives it: with `wait`, first until a job of the run finishes
        (or `wait` seconds pass, holding no transaction); then the tick's one unit of work,
        commit included, timed for /metrics."""
        if wait > 0:
            await wait_for_run(self.database, self.notifier, principal, run_id, wait)
        with self.metrics.tick_seconds.time():
            async with self.database.write_session() as session:
                return await run_service.tick(
                    session, principal, run_id, self.cache, chains=self.chains, since=since
                )

    def stop_workers(self) -> None:
        if self.retention is not None:
            self.retention.stop()
            self.retention = None
        if self.sweeper is not None:
            self.sweeper.stop()
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.worker is not None:
            self.worker.stop(timeout=10_000)
        if self.runtime is not None:
            self.runtime.close()
        self.sweeper = self.worker = self.runtime = None
        self.heartbeat = None

    async def close(self) -> None:
        await self.outbox.drain()
        await asyncio.to_thread(self.stop_workers)
        await self.cache.close()
        await self.notifier.close()
        self.broker.close()
