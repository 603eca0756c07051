"""The `chains.run` actor: run a chain of a workflow run's plan from one node job to the chain's
end, in one worker thread, on one warm sandbox while consecutive nodes share a function version.

Each node keeps its own job row, claimed, run and recorded in turn as `jobs.run` would; the
job store's side (claims, the record-and-start-next commit, resumption) is
`calcgraph.domain.runs.chains`. Failure semantics are those of node execution: a node that
fails ends the chain and the tick fails the run and cancels the rest. An infrastructure failure
releases the node's job and raises, so Dramatiq retries the message (bounded), and the retry
resumes at that node; a redelivered message never re-runs a finished node. Each node may take
the whole sandbox timeout and the actor's time limit is that plus `TIME_LIMIT_MARGIN_MS`, so
after `HAND_OFF_SECONDS` a chain hands its next node over to a new message (`hand_off`).

Completion notifications (what long-poll ticks and run subscriptions wake on) are coalesced
along a chain: the finished jobs are published at most every `NOTIFY_EVERY_SECONDS`, and
always when the chain stops. A tick woken by one of them reconciles every node the worker got
through since (it adopts them in one pass), so a chain of fast nodes costs a few ticks instead
of one per node, while a node slower than the period is still seen as soon as it finishes.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from dramatiq.middleware import CurrentMessage

from calcgraph.db.dialect import is_retryable
from calcgraph.domain.jobs.cache_key import CachedResult, result_key
from calcgraph.domain.jobs.execution.service import job_execution_service
from calcgraph.domain.runs.chains.service import CHAIN_ACTOR, Advance, ChainContext, ChainStep
from calcgraph.domain.runs.chains.service import chain_service as service
from calcgraph.ops import logs
from calcgraph.workers.broker import TIME_LIMIT_MARGIN_MS, ActorSpec
from calcgraph.workers.jobs import InfrastructureFailure
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sandbox import RunRequest, RunResult, Sandbox, SandboxError

log = logging.getLogger("calcgraph.workers.chains")
_RECORD_ATTEMPTS = 4
_DB_RETRIES = 10
NOTIFY_EVERY_SECONDS = 0.05
HAND_OFF_SECONDS = TIME_LIMIT_MARGIN_MS / 2000


class _Held:
    """The sandbox a chain keeps between consecutive nodes of one function version."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.pool = runtime.pool
        self.key: str | None = None
        self.sandbox: Sandbox | None = None

    def run(self, key: str, request: RunRequest) -> RunResult:
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
        return self.sandbox.run(request.inputs).with_duration(time.monotonic() - began)

    def release(self) -> None:
        if self.sandbox is not None and self.key is not None:
            self.pool.release(self.key, self.sandbox)
        self.sandbox = self.key = None


def run_chain(runtime: WorkerRuntime, job_id: str) -> None:
    started = runtime.call(_start(runtime, job_id))
    if started is None:
        return
    context, step = started
    held = _Held(runtime)
    finished: list[str] = []
    began = published = time.monotonic()
    try:
        current: ChainStep | None = step
        while current is not None:
            hand_off = time.monotonic() - began > HAND_OFF_SECONDS
            current = _link(runtime, held, context, current, finished, hand_off)
            if time.monotonic() - published >= NOTIFY_EVERY_SECONDS:
                _publish(runtime, finished)
                published = time.monotonic()
    finally:
        held.release()
        _publish(runtime, finished)


def _publish(runtime: WorkerRuntime, finished: list[str]) -> None:
    for job_id in finished:
        runtime.notifier.publish(job_id)
    finished.clear()


def _link(
    runtime: WorkerRuntime,
    held: _Held,
    context: ChainContext,
    step: ChainStep,
    finished: list[str],
    hand_off: bool,
) -> ChainStep | None:
    """Run one node of the chain and record it (`finished` gets the jobs to notify); the next
    node to run, if any."""
    # Every log line of this node's job (the runtime loop's included) names it.
    token = logs.job_id.set(step.job_id)
    try:
        return _run_link(runtime, held, context, step, finished, hand_off)
    finally:
        logs.job_id.reset(token)


def _run_link(
    runtime: WorkerRuntime,
    held: _Held,
    context: ChainContext,
    step: ChainStep,
    finished: list[str],
    hand_off: bool,
) -> ChainStep | None:
    result = _run(runtime, held, step)
    if (
        result.error is not None
        and result.error.kind == "infrastructure_error"
        and _retries_left(runtime)
    ):
        runtime.call(_release(runtime, step.job_id))
        raise InfrastructureFailure(result.error.message)
    advance = _record(runtime, context, step, result, hand_off)
    if advance.recorded and result.status == "success":
        key = result_key(step.function_version_id, step.inputs)
        try:
            runtime.cache.put(key, CachedResult(result.outputs or {}, result.logs))
        except Exception:  # a cache that is down costs a re-run later, not this result
            log.exception("could not store the result of job %s in the cache", step.job_id)
    finished.extend((step.job_id, *advance.cached))
    return advance.next


def _run(runtime: WorkerRuntime, held: _Held, step: ChainStep) -> RunResult:
    try:
        target = runtime.target(step.function_version_id)
        request = RunRequest(
            target.code_dir,
            target.handler,
            step.inputs,
            target.output_ports,
            runtime.limits,
            image=target.image,
            deps_dir=target.deps_dir,
        )
        runtime.count_run()
        began = time.perf_counter()
        result = held.run(step.function_version_id, request)
        seconds = time.perf_counter() - began
        kind = result.error.kind if result.error is not None else None
        runtime.metrics.job_finished(result.status, kind, seconds)
        log.info(
            "chain job ran: %s%s in %.1f ms",
            result.status,
            f" ({kind})" if kind else "",
            seconds * 1000,
            extra={"status": result.status, "error_kind": kind, "duration_ms": seconds * 1000},
        )
        return result
    except Exception as exc:
        log.exception("job %s could not be run", step.job_id)
        return RunResult.failed("infrastructure_error", f"the worker could not run the job: {exc}")


def _retries_left(runtime: WorkerRuntime) -> bool:
    message = CurrentMessage.get_current_message()
    if message is None:  # called directly, not through a broker: nothing would retry it
        return False
    return int(message.options.get("retries", 0)) < runtime.settings.job_max_retries


def _record(
    runtime: WorkerRuntime,
    context: ChainContext,
    step: ChainStep,
    result: RunResult,
    hand_off: bool,
) -> Advance:
    # The sandbox already ran: retry a busy database here rather than re-running the node.
    for attempt in range(_RECORD_ATTEMPTS):
        try:
            return runtime.call(_advance(runtime, context, step, result, hand_off))
        except Exception as exc:
            if not is_retryable(exc) or attempt == _RECORD_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    return Advance(False)


async def _start(runtime: WorkerRuntime, job_id: str) -> tuple[ChainContext, ChainStep] | None:
    async with runtime.database.write_session() as session:
        return await service.start(session, job_id)


async def _release(runtime: WorkerRuntime, job_id: str) -> bool:
    async with runtime.database.write_session() as session:
        return await job_execution_service.release(session, job_id)


async def _advance(
    runtime: WorkerRuntime,
    context: ChainContext,
    step: ChainStep,
    result: RunResult,
    hand_off: bool,
) -> Advance:
    async with runtime.database.write_session() as session:
        return await service.advance(
            session,
            context,
            step,
            result.status,
            result.outputs if result.status == "success" else None,
            result.error.as_dict() if result.error is not None else None,
            result.logs,
            runtime.cache.lookup,
            hand_off,
        )


def _retry_when(retries: int, exc: BaseException) -> bool:
    return isinstance(exc, InfrastructureFailure) or (is_retryable(exc) and retries < _DB_RETRIES)


def _options() -> dict[str, Any]:
    return {"retry_when": _retry_when}


ACTORS = [ActorSpec(CHAIN_ACTOR, run_chain, _options())]
