"""Submitting jobs: the execute use case's job and a tick's node jobs (the doors' side of the
job store), and reading back a job the caller submitted.

Submit: resolve the function version the call names, check the caller may see its package,
validate and SI-normalise typed inputs, then either answer from the result cache (a job row born
`success` with `cache_hit`, no message) or write a `queued` row and enqueue `jobs.run` for after
the commit. The door waits for the result outside any transaction (`domain/commit_wait`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import found
from calcgraph.domain.events.service import record_job_rows
from calcgraph.domain.functions.deprecation import deprecation_of
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import ResolvedFunction
from calcgraph.domain.jobs.cache_key import CachedResult, ResultLookup, result_key
from calcgraph.domain.jobs.enqueue import RUN_ACTOR, enqueue_job
from calcgraph.domain.jobs.inputs import resolve_inputs
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.jobs.views import Executed, JobView
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.domain.packages.canary.service import canary_service


@dataclass(frozen=True)
class NodeJob:
    """A workflow node's job, as a tick asks for it (the id is already on the node state)."""

    job_id: str
    function_version_id: str
    function_id: str
    package_id: str
    user_id: str
    run_id: str
    node_key: str
    attempt: int
    resolved_inputs: dict[str, Any]
    actor: str = RUN_ACTOR
    """The actor its message goes to: `jobs.run`, or `chains.run` to go on along its chain."""


@dataclass(frozen=True)
class NodeJobRows:
    """A tick's node job rows as `insert_many` takes them, and (job id, actor) of the queued
    ones, whose messages leave after the commit."""

    rows: list[dict[str, Any]]
    to_send: list[tuple[str, str]]


class JobSubmissionService:
    async def resolve(
        self, session: AsyncSession, principal: Principal, address: ExecuteAddress
    ) -> ResolvedFunction:
        """The one function version `address` names, through the same resolver as every other
        door (versions listings, workflow references), so `@latest` means one thing."""
        return await function_version_service.resolve_function_version(session, principal, address)

    async def submit_call(
        self,
        session: AsyncSession,
        principal: Principal,
        address: ExecuteAddress,
        inputs: object,
        cache: ResultLookup,
    ) -> Executed:
        """The job of an execute call as submitted, with the deprecation of the function
        version it runs."""
        target = await self.resolve(session, principal, address)
        routed = None
        if _unpinned(address, target):
            target, routed = await canary_service.route(session, principal, target)
        version, function = target.version, target.function
        schema = version.inputs_schema if version.typed else None
        resolved = resolve_inputs(inputs, schema)
        assert isinstance(inputs, dict)
        now = utcnow()
        # A plain row through Core (as a tick's node jobs are inserted): the ORM's unit of work
        # cost more than the statement on this, the execute path's, hottest write.
        row: dict[str, Any] = {
            "id": new_id(),
            "created_at": now,
            "function_id": function.id,
            "function_version_id": version.id,
            "package_id": function.package_id,
            "user_id": principal.user_id,
            "inputs": inputs,
            "resolved_inputs": resolved,
            "cache_hit": False,
            "attempt": 1,
        }
        hit = await cache.get(result_key(principal.user_id, version.id, resolved))
        if hit is not None:
            _served_from_cache(row, hit, now)
        else:
            row.update(status="queued", deliveries=1)
        await JobRepository.from_session(session).insert_many([row])
        if routed is not None:
            await canary_service.remember(session, row["id"], routed)
        if hit is None:
            enqueue_job(RUN_ACTOR, row["id"], 1)
        else:
            await record_job_rows(session, [row])
        return Executed(_view_of_new(row), deprecation_of(function.name, version))

    async def node_jobs_written(self, session: AsyncSession, prepared: NodeJobRows) -> None:
        """After `node_job_rows`' rows are written in this unit of work: the queued ones'
        messages, sent after the commit, and the result cache's answers as events."""
        for job_id, actor in prepared.to_send:
            enqueue_job(actor, job_id, 1)
        if len(prepared.to_send) < len(prepared.rows):
            await record_job_rows(session, [r for r in prepared.rows if r["status"] != "queued"])

    async def node_job_rows(self, jobs: list[NodeJob], cache: ResultLookup) -> NodeJobRows:
        """Workflow node jobs on the execute path (result cache, `queued` row, message after
        the commit) for a whole tick at once: their rows, answered from the result cache where
        it has the result, for the tick's write to insert (`RunRepository.write_tick`: one
        INSERT of every row, without an ORM object per job; the (run, node, attempt) unique
        key refuses a node submitted twice), then told `node_jobs_written`. The inputs were
        resolved and checked by the tick."""
        rows: list[dict[str, Any]] = []
        to_send: list[tuple[str, str]] = []
        now = utcnow()
        hits = await cache.get_many(
            [
                result_key(spec.user_id, spec.function_version_id, spec.resolved_inputs)
                for spec in jobs
            ]
        )
        for spec, hit in zip(jobs, hits, strict=True):
            row: dict[str, Any] = {
                "id": spec.job_id,
                "created_at": now,
                "function_id": spec.function_id,
                "function_version_id": spec.function_version_id,
                "package_id": spec.package_id,
                "user_id": spec.user_id,
                "inputs": spec.resolved_inputs,
                "resolved_inputs": spec.resolved_inputs,
                "workflow_run_id": spec.run_id,
                "node_key": spec.node_key,
                "attempt": spec.attempt,
                "status": "queued",
                "cache_hit": False,
                "deliveries": 1,
                "logs": None,
                "started_at": None,
                "finished_at": None,
            }
            if hit is not None:
                _served_from_cache(row, hit, now)
            else:
                to_send.append((spec.job_id, spec.actor))
            rows.append(row)
        return NodeJobRows(rows, to_send)

    async def view(self, session: AsyncSession, job_id: str) -> JobView:
        """The job as it is now, for the door that submitted it (access was checked then)."""
        job = found(await JobRepository.from_session(session).get_view(job_id), f"job {job_id!r}")
        return job


def _unpinned(address: ExecuteAddress, target: ResolvedFunction) -> bool:
    """A call that asked for no version (contract 11): `package/function`, `@latest`, or a
    function's id (not a function version's). A canary routes only these."""
    if address.function_id is not None:
        return address.function_id == target.function.id
    return address.package_selector is None and address.function_selector in (None, "latest")


def _view_of_new(row: dict[str, Any]) -> JobView:
    """The view of a row `submit` just wrote (columns it left out are NULL)."""
    return JobView(
        id=row["id"],
        function_id=row["function_id"],
        function_version_id=row["function_version_id"],
        package_id=row["package_id"],
        user_id=row["user_id"],
        status=row["status"],
        inputs=row["inputs"],
        outputs=row.get("outputs"),
        error=None,
        logs=row.get("logs"),
        cache_hit=row["cache_hit"],
        workflow_run_id=None,
        node_key=None,
        created_at=row["created_at"],
        started_at=row.get("started_at"),
        finished_at=row.get("finished_at"),
    )


def _served_from_cache(row: dict[str, Any], hit: CachedResult, now: datetime) -> None:
    """A new job row answered by the result cache: done as it is written, nothing to send."""
    row.update(
        status="success",
        cache_hit=True,
        outputs=hit.outputs,
        logs=hit.logs,
        started_at=now,
        finished_at=now,
        deliveries=0,
    )


job_submission_service = JobSubmissionService()
