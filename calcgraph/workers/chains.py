"""The `chains.run` actor: run a chain of a workflow run's plan from one node job to the chain's
end, in one worker thread, on one warm sandbox while consecutive nodes share a function version.

Each node keeps its own job row, with its own status, outputs, logs and times; the job store's
side (claims, recording a batch, resumption) is `calcgraph.domain.runs.chains`. The worker runs
consecutive nodes back to back, resolving each node's inputs from its predecessor's outputs
and looking up the result cache just before it would run, and records them in one commit per
batch: the first node's job (the running one) finishes, the later ones' jobs are written
finished with the times they ran, and the next node's job starts. A batch is recorded once
`FLUSH_EVERY_SECONDS` passed since the last commit, at a failure, at the chain's end, and
before a node the held sandbox cannot run (another function version, or a sandbox gone): a
chain of fast nodes costs a handful of commits instead of one per node. Until the batch is
recorded, the running job of its first node keeps any tick from starting the nodes after it.

Failure semantics are those of node execution: a node that fails ends the chain (its batch is
recorded with it) and the tick fails the run and cancels the rest. An infrastructure failure
records the nodes before it, leaves the node's job `queued` (released, when it is the batch's
running one) and raises, so Dramatiq retries the message (bounded), and the retry resumes at
that node; a redelivered message never re-runs a recorded node, and nodes of a batch lost with
its worker run again once their first job is released. Each node may take the whole sandbox
timeout and the actor's time limit is that plus `TIME_LIMIT_MARGIN_MS`, so after
`HAND_OFF_SECONDS` a chain hands its next node over to a new message.

Completion notifications (what long-poll ticks and run subscriptions wake on) follow the
batches: a batch's jobs are published after its commit. A tick woken by them adopts every node
of the batch in one pass, while a node slower than the period is still seen as soon as it
finishes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from calcgraph.db.base import new_id, utcnow
from calcgraph.db.dialect import is_retryable
from calcgraph.domain.jobs.cache_key import CachedResult, result_key
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.store.service import job_store_service
from calcgraph.domain.runs.chains.service import (
    CHAIN_ACTOR,
    Advance,
    Batch,
    ChainContext,
    ChainStep,
    Link,
)
from calcgraph.domain.runs.chains.service import chain_service as service
from calcgraph.ops import logs
from calcgraph.workers.actor import ActorSpec
from calcgraph.workers.broker import TIME_LIMIT_MARGIN_MS
from calcgraph.workers.jobs import InfrastructureFailure, actor_options, execute, retries_left
from calcgraph.workers.runtime import CodeRuntime
from calcgraph.workers.sandbox import RunRequest, RunResult, Sandbox, SandboxError
from calcgraph.workers.sandbox.pool import Attach

log = logging.getLogger("calcgraph.workers.chains")
_RECORD_ATTEMPTS = 4
FLUSH_EVERY_SECONDS = 0.05
HAND_OFF_SECONDS = TIME_LIMIT_MARGIN_MS / 2000


class _Held:
    """The sandbox a chain keeps between consecutive nodes of one function version, for the
    run's owner (the spec's tenant): it is released, not reused, for another version or user."""

    def __init__(self, runtime: CodeRuntime) -> None:
        self.pool = runtime.pool
        self.key: str | None = None
        self.sandbox: Sandbox | None = None

    def run(self, key: str, request: RunRequest, attach: Attach | None = None) -> RunResult:
        began = time.monotonic()
        spec = request.spec
        if self.sandbox is not None and (
            self.key != key or self.sandbox.spec != spec or not self.sandbox.alive
        ):
            self.release()
        if self.sandbox is None:
            try:
                self.sandbox = self.pool.acquire(key, spec)
            except SandboxError as exc:
                return exc.result(time.monotonic() - began)
            self.key = key
        if attach is not None:
            attach(self.sandbox)
        return self.sandbox.run(request.inputs).with_duration(time.monotonic() - began)

    def holds(self, key: str) -> bool:
        """Whether the next node of function version `key` can run on the held sandbox."""
        return self.key == key and self.sandbox is not None and self.sandbox.alive

    def release(self) -> None:
        if self.sandbox is not None and self.key is not None:
            self.pool.release(self.key, self.sandbox)
        self.sandbox = self.key = None


def run_chain(runtime: CodeRuntime, job_id: str) -> None:
    lease = new_id()
    started = runtime.call(_start(runtime, job_id, lease))
    if started is None:
        return
    context, head = started
    held = _Held(runtime)
    began = time.monotonic()
    # Every job the chain starts runs under its claim's lease, which beats until the end.
    with runtime.leases.holding(lease):
        try:
            current: ChainStep | None = head
            while current is not None:
                current = _batch(runtime, held, context, current, began)
        finally:
            held.release()


class _Due:
    """Records a batch while a later node of it runs, once the batch is due: a slow node holds
    back neither the results before it nor its own `running` job. Between nodes, the chain
    itself checks whether the batch is due."""

    def __init__(self, flush: Callable[[list[Link], ChainStep, datetime], ChainStep | None]):
        self.since = time.monotonic()
        self._flush = flush
        self._lock = threading.Lock()
        self._links: list[Link] = []
        self._running: tuple[ChainStep, datetime] | None = None
        self._closed = False
        self._fired = False
        self.next: ChainStep | None = None
        """After a recording here: the running node, if its job was started with it."""
        self._error: BaseException | None = None
        self._timer = threading.Timer(FLUSH_EVERY_SECONDS, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def running(self, links: list[Link], step: ChainStep, started_at: datetime) -> None:
        with self._lock:
            self._links, self._running = list(links), (step, started_at)

    def ran(self) -> bool:
        """The node is done: whether the batch was recorded meanwhile (`next` says how)."""
        with self._lock:
            self._running = None
            fired = self._fired
        if fired:
            self._timer.join()
            if self._error is not None:
                raise self._error
        return fired

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            if self._closed or self._running is None:
                return
            self._fired = self._closed = True
            links, (step, started_at) = self._links, self._running
        try:
            self.next = self._flush(links, step, started_at)
        except BaseException as exc:  # raised in the chain's thread, in `ran`
            self._error = exc


def _batch(
    runtime: CodeRuntime, held: _Held, context: ChainContext, head: ChainStep, began: float
) -> ChainStep | None:
    """Run the chain from `head` (a running job) node after node until the batch is due, and
    record the batch in one commit; the next batch's head, if the chain goes on."""

    def early(links: list[Link], step: ChainStep, started_at: datetime) -> ChainStep | None:
        return _flush(runtime, context, Batch(links, step, started_at=started_at))

    links: list[Link] = []
    due = _Due(early)
    step = head
    try:
        while True:
            started_at = utcnow()
            if links:
                due.running(links, step, started_at)
            # A claimed head the owner may no longer execute is recorded refused, never run.
            denied = service.refused(step, started_at) if step is head else None
            link = denied or _link(runtime, held, context, step, started_at)
            if links and due.ran():
                if due.next is None:
                    return None  # the run no longer waits for this node
                # `step` is the new batch's running job, with the new batch's access check.
                step = due.next
                links, due = [], _Due(early)
            error = link.outcome.error
            if (
                error is not None
                and error.get("kind") == "infrastructure_error"
                and retries_left(runtime.settings)
            ):
                # The retry resumes at this node: released if its job is the running one,
                # else written `queued` after the nodes before it.
                if links:
                    _flush(runtime, context, Batch(links, step, queued=True))
                else:
                    runtime.call(_release(runtime, step.job_id, context.lease))
                raise InfrastructureFailure(str(error.get("message")))
            links.append(link)
            if link.outcome.status != "success":
                return _flush(runtime, context, Batch(links))
            following = service.following(context, step, link.outcome.outputs or {})
            while following is not None:
                denied = service.refused(following)
                if denied is not None:
                    # The owner may not execute it (checked as the batch began): not run, not
                    # answered from the cache; recorded failed, the tick fails the run.
                    links.append(denied)
                    return _flush(runtime, context, Batch(links))
                # Looked up just before the node would run, as a tick submitting it would.
                version, inputs = following.function_version_id, following.inputs
                hit = (
                    None
                    if context.refresh
                    else runtime.cache.lookup(result_key(context.user_id, version, inputs))
                )
                if hit is None:
                    break
                now = utcnow()
                outcome = Outcome("success", hit.outputs, None, hit.logs)
                links.append(Link(following, outcome, now, now, True))
                following = service.following(context, following, hit.outputs)
            if following is None:
                return _flush(runtime, context, Batch(links))
            if time.monotonic() - began > HAND_OFF_SECONDS:
                return _flush(runtime, context, Batch(links, following, queued=True, send=True))
            if time.monotonic() - due.since >= FLUSH_EVERY_SECONDS or not held.holds(
                following.function_version_id
            ):
                return _flush(runtime, context, Batch(links, following))
            step = following
    finally:
        due.close()


def _link(
    runtime: CodeRuntime,
    held: _Held,
    context: ChainContext,
    step: ChainStep,
    started_at: datetime,
) -> Link:
    # Every log line of this node's job (the runtime loop's included) names it.
    token = logs.job_id.set(step.job_id)
    try:
        result = _run(runtime, held, context, step)
        return Link(step, result.recorded(), started_at, utcnow())
    finally:
        logs.job_id.reset(token)


def _flush(runtime: CodeRuntime, context: ChainContext, batch: Batch) -> ChainStep | None:
    """Record the batch, publish its finished jobs and cache its results; the next head."""
    advance = _record(runtime, context, batch)
    for job_id in advance.recorded:
        runtime.notifier.publish(job_id)
    for link in batch.links[: len(advance.recorded)]:
        if link.outcome.status != "success" or link.cache_hit:
            continue
        key = result_key(context.user_id, link.step.function_version_id, link.step.inputs)
        try:
            runtime.cache.put(key, CachedResult(link.outcome.outputs or {}, link.outcome.logs))
        except Exception:  # a cache that is down costs a re-run later, not this result
            log.exception("could not store the result of job %s in the cache", link.step.job_id)
    return advance.next


def _run(runtime: CodeRuntime, held: _Held, context: ChainContext, step: ChainStep) -> RunResult:
    # Every node of a run's chain is its owner's job: the held sandbox is that user's.
    return execute(
        runtime,
        step.job_id,
        step.function_version_id,
        step.inputs,
        held.run,
        user_id=context.user_id,
        run_id=context.run_id,
    )


def _record(runtime: CodeRuntime, context: ChainContext, batch: Batch) -> Advance:
    async def advance() -> Advance:
        async with runtime.database.write_session() as session:
            return await service.record(session, context, batch)

    # The sandbox already ran: retry a busy database here rather than re-running the nodes.
    for attempt in range(_RECORD_ATTEMPTS):
        try:
            return runtime.call(advance())
        except Exception as exc:
            if not is_retryable(exc) or attempt == _RECORD_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    return Advance()


async def _start(
    runtime: CodeRuntime, job_id: str, lease: str
) -> tuple[ChainContext, ChainStep] | None:
    async with runtime.database.write_session() as session:
        return await service.start(session, job_id, lease)


async def _release(runtime: CodeRuntime, job_id: str, lease: str) -> bool:
    async with runtime.database.write_session() as session:
        return await job_store_service.release(session, job_id, lease)


# Same retry policy as `jobs.run`: infrastructure failures while retries are left, a busy
# database a bounded number of times.
ACTORS = [ActorSpec(CHAIN_ACTOR, run_chain, actor_options(), runs_code=True)]
