"""The `jobs.run` actor: run one job by id, record its result in the job store, idempotently.

1. Claim `queued -> running` with a guarded UPDATE; 0 rows means another delivery claimed or
   finished it: ack and return (a redelivered message never runs a job twice). The claim checks
   that the job's owner may still execute its function version (contract section 8b); a
   refused job is recorded failed `permission_denied` by the claim and never runs. The claim
   sets the job's lease, which the process's heartbeat renews while it runs. Claims and finishes go
   through the process's `JobStore`, which groups concurrent ones per transaction.
2. Stage the code and run it on the process's warm pool, in this worker thread.
3. Record `success`/`failed` with a guarded UPDATE (`running -> ...` under the claim's lease:
   a worker the sweeper gave up on finds 0 rows), cache a success, notify.

User-code failures (user_error, timeout, out_of_memory, sandbox_error) are results, never
retried. An infrastructure failure puts the job back to `queued` and raises, so Dramatiq retries
it with backoff, at most `job_max_retries` times; the last attempt records the failure.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from dramatiq.middleware import CurrentMessage

from calcgraph.db.dialect import is_retryable
from calcgraph.domain.jobs.cache_key import CachedResult, result_key
from calcgraph.domain.jobs.enqueue import RUN_ACTOR
from calcgraph.domain.jobs.store.repository import ClaimedRow, Finish
from calcgraph.domain.jobs.store.service import job_store_service as service
from calcgraph.domain.quotas.limits import over_storage
from calcgraph.domain.quotas.service import quota_service
from calcgraph.ops import logs
from calcgraph.settings import Settings
from calcgraph.workers.actor import ActorSpec
from calcgraph.workers.runtime import CodeRuntime
from calcgraph.workers.sandbox import RunRequest, RunResult
from calcgraph.workers.sandbox.pool import Attach

log = logging.getLogger("calcgraph.workers.jobs")
_RECORD_ATTEMPTS = 4
_DB_RETRIES = 10


class InfrastructureFailure(Exception):
    """The platform, not the job, failed: Dramatiq retries the message (bounded)."""


def run_job(runtime: CodeRuntime, job_id: str) -> None:
    # Every log line of this job (the runtime loop's included) names it.
    token = logs.job_id.set(job_id)
    try:
        _run_job(runtime, job_id)
    finally:
        logs.job_id.reset(token)


def _run_job(runtime: CodeRuntime, job_id: str) -> None:
    claimed = runtime.call(_claim(runtime, job_id))
    if claimed is None:
        return
    if claimed.refused:  # recorded failed by the claim: nothing runs
        runtime.notifier.publish(job_id)
        return
    # The claim's lease is beating until the result is recorded: a process killed outright
    # stops it, and the sweeper hands the job to another worker.
    with runtime.leases.holding(claimed.lease):
        result = _run(runtime, claimed)
        if (
            result.error is not None
            and result.error.kind == "infrastructure_error"
            and retries_left(runtime.settings)
        ):
            runtime.call(_release(runtime, job_id, claimed.lease))
            raise InfrastructureFailure(result.error.message)
        recorded = _record(runtime, job_id, claimed.lease, result)
    if recorded and result.status == "success":
        key = result_key(claimed.user_id, claimed.function_version_id, claimed.resolved_inputs)
        try:
            runtime.cache.put(key, CachedResult(result.outputs or {}, result.logs))
        except Exception:  # a cache that is down costs a re-run later, not this result
            log.exception("could not store the result of job %s in the cache", job_id)
    runtime.notifier.publish(job_id)


def _run(runtime: CodeRuntime, claimed: ClaimedRow) -> RunResult:
    return execute(
        runtime,
        claimed.job_id,
        claimed.function_version_id,
        claimed.resolved_inputs,
        runtime.pool.run,
        user_id=claimed.user_id,
    )


def execute(
    runtime: CodeRuntime,
    job_id: str,
    function_version_id: str,
    inputs: dict[str, Any],
    run: Callable[[str, RunRequest, Attach], RunResult],
    *,
    user_id: str,
    run_id: str | None = None,
) -> RunResult:
    """Run one job's function on `run` (the warm pool, or a chain's held sandbox), counted and
    logged; a worker-side failure becomes an `infrastructure_error` result. The job runs in a
    sandbox of its owner `user_id` only. While it runs, the process's cancel watch may kill
    its sandbox (the job, or its run `run_id`, was cancelled): the result is then `cancelled`
    (never recorded: the job's row ended already)."""
    with runtime.running.watching(job_id, run_id) as watch:
        try:
            result = _sandboxed(runtime, function_version_id, inputs, run, watch.attach, user_id)
        except Exception as exc:
            log.exception("job %s could not be run", job_id)
            result = RunResult.failed(
                "infrastructure_error", f"the worker could not run the job: {exc}"
            )
    if watch.stopped:
        return RunResult.failed(
            "cancelled", "the job was cancelled; its sandbox was killed", result.logs
        )
    return result


def _sandboxed(
    runtime: CodeRuntime,
    function_version_id: str,
    inputs: dict[str, Any],
    run: Callable[[str, RunRequest, Attach], RunResult],
    attach: Attach,
    user_id: str,
) -> RunResult:
    """The job's function run on `run` under its declared resources (or refused), counted,
    timed and logged."""
    target = runtime.target(function_version_id)
    refusal = runtime.backend.resource_refusal
    if target.limits is not None and refusal is not None:
        # Contract 11: declared resources are enforced or the job is refused, never run
        # under other limits.
        return RunResult.failed("sandbox_error", refusal)
    request = RunRequest(
        target.code_dir,
        target.handler,
        inputs,
        target.output_ports,
        target.limits or runtime.limits,
        image=target.image,
        deps_dir=target.deps_dir,
        tenant=user_id,
    )
    runtime.count_run()
    began = time.perf_counter()
    result = within_storage(runtime, user_id, run(function_version_id, request, attach))
    seconds = time.perf_counter() - began
    kind = result.error.kind if result.error is not None else None
    runtime.metrics.job_finished(result.status, kind, seconds)
    log.info(
        "job ran: %s%s in %.1f ms",
        result.status,
        f" ({kind})" if kind else "",
        seconds * 1000,
        extra={"status": result.status, "error_kind": kind, "duration_ms": seconds * 1000},
    )
    return result


def within_storage(runtime: CodeRuntime, user_id: str, result: RunResult) -> RunResult:
    """Contract 8b: a result that would take its user past the storage quota is not kept; the
    job fails `quota_exceeded` instead (its logs are kept, at most 64 KiB)."""
    if result.status != "success":
        return result
    quotas = runtime.settings.quotas
    adding = len(json.dumps(result.outputs, separators=(",", ":"))) + len(result.logs)
    stored = quota_service.cached(user_id)
    if stored is None:
        stored = runtime.call(_stored(runtime, user_id))
    if not over_storage(stored, adding, quotas):
        return result
    quota_service.forget(user_id)
    return RunResult.failed(
        "quota_exceeded",
        f"QuotaExceeded: the outputs ({adding} bytes) would take your stored inputs, outputs "
        f"and logs ({stored} bytes) past {quotas.stored_bytes} bytes, the most one user may "
        "store; they are not kept",
        result.logs,
        result.duration,
    )


async def _stored(runtime: CodeRuntime, user_id: str) -> int:
    async with runtime.database.read_session() as session:
        return await quota_service.stored_bytes(session, user_id)


def retries_left(settings: Settings) -> bool:
    message = CurrentMessage.get_current_message()
    if message is None:  # called directly, not through a broker: nothing would retry it
        return False
    return int(message.options.get("retries", 0)) < settings.job_max_retries


def _record(runtime: CodeRuntime, job_id: str, lease: str, result: RunResult) -> bool:
    # The sandbox already ran: retry a busy database here rather than re-running the job.
    for attempt in range(_RECORD_ATTEMPTS):
        try:
            return runtime.call(_finish(runtime, job_id, lease, result))
        except Exception as exc:
            if not is_retryable(exc) or attempt == _RECORD_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    return False


async def _claim(runtime: CodeRuntime, job_id: str) -> ClaimedRow | None:
    return await runtime.store.claim(job_id)


async def _release(runtime: CodeRuntime, job_id: str, lease: str) -> bool:
    async with runtime.database.write_session() as session:
        return await service.release(session, job_id, lease)


async def _finish(runtime: CodeRuntime, job_id: str, lease: str, result: RunResult) -> bool:
    return await runtime.store.finish(Finish(job_id, result.recorded(), lease))


def retry_when(retries: int, exc: BaseException) -> bool:
    # InfrastructureFailure is only raised while retries are left (`retries_left`); a busy
    # database before the claim is bounded here.
    return isinstance(exc, InfrastructureFailure) or (is_retryable(exc) and retries < _DB_RETRIES)


def actor_options() -> dict[str, Any]:
    return {"retry_when": retry_when}


ACTORS = [ActorSpec(RUN_ACTOR, run_job, actor_options(), runs_code=True)]
