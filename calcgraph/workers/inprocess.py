"""Execution as the API process holds it: the backbone (the broker it sends to, the result
cache it reads, the notifier it waits on), the outbox on its database, the use cases that
commit, then wait over them (`service`, a `CommitWait`: what the doors call), and, with no
Redis configured, the in-process workers themselves (started by `serve`'s lifespan, so one
command gives a working platform)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import dramatiq
from dramatiq.brokers.stub import StubBroker

from calcgraph.db.engine import Database
from calcgraph.domain.commit_wait.service import CommitWait
from calcgraph.domain.jobs.enqueue import Message
from calcgraph.ops.metrics import Metrics
from calcgraph.settings import Settings
from calcgraph.workers.assembly import Workers
from calcgraph.workers.backbone import Backbone
from calcgraph.workers.broker import QUEUE, AsyncSender, send, send_many
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.result_cache import RedisResultCache
from calcgraph.workers.run_changes import attach_run_changes
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sandbox import SandboxBackend
from calcgraph.workers.sweeper import Sweeper

log = logging.getLogger("calcgraph.workers")
_REDIS_PROBE_SECONDS = 1.0


class Execution:
    def __init__(
        self, settings: Settings, database: Database, metrics: Metrics | None = None
    ) -> None:
        self.settings = settings
        self.database = database
        self.metrics = metrics if metrics is not None else Metrics()
        self.backbone = Backbone.build(settings)
        self.broker = self.backbone.broker
        self.cache = self.backbone.cache
        self.notifier = self.backbone.notifier
        self.metrics.watch(cache=self.cache)
        # Through Redis, a tick's response does not wait for its messages: they leave on the
        # event loop through an asyncio client while it is answered (a tick submitting 1,000
        # jobs spent 90 ms sending), without a blocking client in a thread.
        self.sender = (
            None
            if settings.redis_url is None
            else AsyncSender(self.broker, settings.redis_url.get_secret_value())
        )
        self.outbox = attach(
            database,
            Outbox(
                self.send,
                self.send_many,
                off_loop=not self.in_process,
                detach=not self.in_process,
                send_async=None if self.sender is None else self.sender.send_many,
            ),
        )
        attach_signal(database, self.notifier)
        attach_run_changes(database, self.backbone.changes)
        self.service = CommitWait(
            database,
            self.cache,
            self.notifier,
            changes=self.backbone.changes,
            execute_max_wait=settings.execute_max_wait_seconds,
            chains=settings.chain_execution == "chain",
            tick_timer=self.metrics.tick_seconds.time,
            quotas=settings.quotas,
        )
        self.workers: Workers | None = None
        self._redis_seen: tuple[float, bool] | None = None

    @property
    def in_process(self) -> bool:
        return self.settings.redis_url is None

    def send(self, message: Message) -> None:
        send(self.broker, message)

    def send_many(self, messages: Sequence[Message]) -> int:
        return send_many(self.broker, messages)

    def start_workers(self, backend: SandboxBackend | None = None) -> WorkerRuntime:
        """Run the workers in this process (the embedded setup, and tests)."""
        self.workers = Workers(
            self.settings,
            self.backbone,
            threads=self.settings.inprocess_worker_threads,
            own_process=False,
            backend=backend,
            metrics=self.metrics,
        ).start()
        return self.workers.runtime

    @property
    def runtime(self) -> WorkerRuntime | None:
        return self.workers.runtime if self.workers is not None else None

    @property
    def worker(self) -> dramatiq.Worker | None:
        return self.workers.worker if self.workers is not None else None

    @property
    def sweeper(self) -> Sweeper | None:
        return self.workers.sweeper if self.workers is not None else None

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

    def stop_workers(self) -> None:
        if self.workers is not None:
            self.workers.stop()
            self.workers = None

    async def close(self) -> None:
        await self.outbox.drain()
        if self.sender is not None:
            await self.sender.close()
        if self.workers is not None:  # through Redis the workers are processes of their own
            await asyncio.to_thread(self.stop_workers)
        await self.cache.close()
        await self.notifier.close()
        await self.backbone.changes.close()
        self.broker.close()
