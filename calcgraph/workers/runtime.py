"""What one worker process holds for its actors.

`WorkerRuntime`, for every actor: its own event loop (for the async database), its database
engine with the outbox, the job store, the leases of the jobs it runs, the result cache, the
notifier and the broker. `CodeRuntime` adds what the actors that run user code need: the
sandbox backend and its warm pool, the code cache and the limits; it is built only when the
process declares such an actor (`ActorSpec.runs_code`).

Dramatiq runs actors in worker threads; an actor hands each unit of work to the runtime's loop
(`call`) and runs the sandbox in its own thread, so a slow job never blocks the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from calcgraph.builds.artifact import runnable
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.inputs import output_ports
from calcgraph.domain.jobs.store.service import job_store_service as service
from calcgraph.ops.metrics import WorkerMetrics
from calcgraph.settings import Settings
from calcgraph.workers.backbone import Backbone
from calcgraph.workers.broker import send, send_many
from calcgraph.workers.code_cache import CodeCache, CodeError
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.job_store import JobStore
from calcgraph.workers.leases import Leases
from calcgraph.workers.notify import Notifier
from calcgraph.workers.result_cache import ResultCache
from calcgraph.workers.run_changes import attach_run_changes
from calcgraph.workers.running import Running
from calcgraph.workers.sandbox import SandboxBackend, WarmPool, create_backend, limits_from
from calcgraph.workers.sandbox.base import Limits, declared_limits

log = logging.getLogger("calcgraph.workers")
T = TypeVar("T")
_MAX_TARGETS = 10_000


@dataclass(frozen=True)
class Target:
    """A function version ready to run: its staged code, handler and output ports."""

    code_dir: Path
    handler: str
    output_ports: tuple[str, ...]
    image: str | None = None
    """docker: the function version's built image (its dependencies are inside)."""
    deps_dir: Path | None = None
    """bwrap/process: the built artifact's installed dependencies, mounted read-only."""
    limits: Limits | None = None
    """The worker's limits narrowed by the version's declared resources (contract 11); None:
    it declares none, the worker's limits apply."""


class WorkerRuntime:
    def __init__(
        self, settings: Settings, backbone: Backbone, metrics: WorkerMetrics | None = None
    ) -> None:
        self.settings = settings
        # The API's metrics for in-process workers; a worker process's own otherwise.
        self.metrics = metrics if metrics is not None else WorkerMetrics()
        self.broker = broker = backbone.broker
        self.cache: ResultCache = backbone.cache
        self.notifier: Notifier = backbone.notifier
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name="calcgraph-worker-loop", daemon=True
        )
        self._thread.start()
        # No pre-ping: a claim or finish that meets a connection PostgreSQL dropped fails, the
        # pool is invalidated, and the job store retries the request alone on a fresh one.
        self.database = Database.from_settings(settings, pre_ping=False, queue=False)
        outbox = Outbox(
            lambda message: send(broker, message),
            lambda messages: send_many(broker, messages),
            off_loop=settings.redis_url is not None,
        )
        attach(self.database, outbox)
        attach_signal(self.database, self.notifier)
        attach_run_changes(self.database, backbone.changes)
        self.store = JobStore(self.database)
        self.leases = Leases()
        """The leases of the jobs this process runs, whose heartbeat `Heartbeat` renews."""
        self.metrics.watch(cache=self.cache)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the runtime's loop and wait for it, from a worker thread. On a loop
        already closed (a job ending as its worker stops) the coroutine is closed, not left
        to be collected unawaited."""
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except BaseException:
            coro.close()
            raise
        return future.result()

    def close(self) -> None:
        try:
            self.call(self.database.dispose())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
            self.loop.close()


class CodeRuntime(WorkerRuntime):
    def __init__(
        self,
        settings: Settings,
        backbone: Backbone,
        metrics: WorkerMetrics | None = None,
        *,
        backend: SandboxBackend | None = None,
    ) -> None:
        self._owns_backend = backend is None
        # Fail closed now, naming the fix, rather than at the first job.
        self.backend = backend or create_backend(settings, check=True)
        super().__init__(settings, backbone, metrics)
        self.pool = WarmPool(
            self.backend,
            max_size=settings.warm_pool_size,
            max_idle_seconds=settings.warm_idle_seconds,
        )
        self.metrics.watch(pool=self.pool)
        self.code_cache = CodeCache(settings.code_cache_dir)
        self.limits = limits_from(settings)
        self._targets: dict[str, Target] = {}
        self._lock = threading.Lock()
        self.runs = 0
        """Jobs this runtime ran in a sandbox (what the idempotency tests count)."""
        self.running = Running()
        """The jobs running in a sandbox now, which `CancelWatch` stops when cancelled."""

    def count_run(self) -> None:
        with self._lock:
            self.runs += 1

    def target(self, function_version_id: str) -> Target:
        """The staged code of a function version; rows are immutable, so it is kept."""
        found = self._targets.get(function_version_id)
        if found is not None and found.code_dir.is_dir():
            return found
        code = self.call(self._code(function_version_id))
        if code is None:
            raise CodeError(f"function version {function_version_id!r} has no code")
        code_dir = self.code_cache.stage(
            code.files, lambda digests: self.call(self._blobs(digests))
        )
        found = Target(
            code_dir,
            code.handler,
            output_ports(code.outputs_schema),
            limits=declared_limits(self.limits, code.resources),
        )
        if code.build_reference is not None:
            build = runnable(self.settings.build_dir, code.build_reference)
            found = replace(found, image=build.image, deps_dir=build.deps_dir)
            if build.image is not None and code.build_id is not None:
                self.call(self._mark_pulled(code.build_id))
        with self._lock:
            if len(self._targets) >= _MAX_TARGETS:
                self._targets.clear()
            self._targets[function_version_id] = found
        return found

    async def _code(self, function_version_id: str) -> Any:
        async with self.database.read_session() as session:
            return await service.code(session, function_version_id)

    async def _mark_pulled(self, build_id: str) -> None:
        async with self.database.write_session() as session:
            await service.mark_pulled(session, build_id)

    async def _blobs(self, digests: list[str]) -> dict[str, bytes]:
        async with self.database.read_session() as session:
            return await service.blobs(session, digests)

    def close(self) -> None:
        self.pool.close()
        if self._owns_backend:
            self.backend.close()
        super().close()
