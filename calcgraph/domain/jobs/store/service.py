"""Submitting jobs (the execute use case) and the job store's transitions (the actors' side).

Submit: resolve the function version the call names, check the caller may see its package,
validate and SI-normalise typed inputs, then either answer from the result cache (a job row born
`success` with `cache_hit`, no message) or write a `queued` row and enqueue `jobs.run` for after
the commit. The door waits for the result outside any transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.builds.repository import BuildRepository
from calcgraph.domain.errors import NotFound
from calcgraph.domain.events.service import (
    record_job_rows,
    record_job_transitions,
    record_rows,
    transition_rows,
)
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import ResolvedFunction
from calcgraph.domain.jobs.address import ExecuteAddress
from calcgraph.domain.jobs.cache_key import CachedResult, ResultLookup, result_key
from calcgraph.domain.jobs.enqueue import enqueue_job, job_message_id
from calcgraph.domain.jobs.inputs import resolve_inputs
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.jobs.store.repository import (
    ClaimedRow,
    CodeRow,
    Finish,
    JobStoreRepository,
)
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.packages.canary.service import canary_service
from calcgraph.domain.packages.dependency_rules import staged_files

RUN_ACTOR = "jobs.run"
TERMINAL = frozenset({"success", "failed"})


@dataclass(frozen=True)
class SweepReport:
    resent: list[str] = field(default_factory=list)
    """Queued jobs whose message the broker no longer held: sent again."""
    waiting: int = 0
    """Queued jobs past `stale_after` whose message still waits in the broker: left alone."""
    handed_over: list[str] = field(default_factory=list)
    """Running jobs whose worker stopped beating: queued again for another worker."""
    given_up: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


Waiting = Callable[[Collection[str]], set[str] | None]
"""Which of these broker message ids the broker still holds (queued, delayed for a retry, or
fetched and not yet acknowledged); None when the broker cannot say (it is down)."""


@dataclass(frozen=True)
class Submitted:
    """An execute call's job as submitted, and the function version it runs."""

    job: JobView
    target: ResolvedFunction


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


class JobStoreService:
    # --- the doors' side ---

    async def resolve(
        self, session: AsyncSession, principal: Principal, address: ExecuteAddress
    ) -> ResolvedFunction:
        """The one function version `address` names, through the same resolver as every other
        door (versions listings, workflow references), so `@latest` means one thing."""
        return await function_version_service.resolve_function_version(
            session,
            principal,
            function_id=address.function_id,
            package=address.package,
            package_version=address.package_selector,
            function=address.function,
            version=address.function_selector,
        )

    async def submit(
        self,
        session: AsyncSession,
        principal: Principal,
        address: ExecuteAddress,
        inputs: object,
        cache: ResultLookup,
    ) -> JobView:
        return (await self.submit_call(session, principal, address, inputs, cache)).job

    async def submit_call(
        self,
        session: AsyncSession,
        principal: Principal,
        address: ExecuteAddress,
        inputs: object,
        cache: ResultLookup,
    ) -> Submitted:
        """The job of an execute call, with the function version it runs."""
        target = await self.resolve(session, principal, address)
        routed = None
        if _unpinned(address, target):
            target, routed = await canary_service.route(session, principal, target)
        version, function = target.version, target.function
        schema = version.inputs_schema if version.typed else None
        resolved = resolve_inputs(inputs, schema)
        assert isinstance(inputs, dict)
        now = utcnow()
        # A plain row through Core (the insert of `submit_node_jobs`): the ORM's unit of work
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
        return Submitted(_view_of_new(row), target)

    async def submit_node_jobs(
        self, session: AsyncSession, jobs: list[NodeJob], cache: ResultLookup
    ) -> None:
        """Workflow node jobs: the execute path (result cache, `queued` row, message after the
        commit) for a whole tick at once, in one flush. The inputs were resolved and checked
        by the tick; the (run, node, attempt) unique key refuses a node submitted twice."""
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
        # One INSERT of every row, without an ORM object per job: a tick may submit 1,000.
        await JobRepository.from_session(session).insert_many(rows)
        for job_id, actor in to_send:
            enqueue_job(actor, job_id, 1)
        if len(to_send) < len(rows):
            await record_job_rows(session, [r for r in rows if r["status"] != "queued"])

    async def view(self, session: AsyncSession, job_id: str) -> JobView:
        """The job as it is now, for the door that submitted it (access was checked then)."""
        job = await JobRepository.from_session(session).get_view(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    # --- the actors' side (each call is one unit of work of an actor message) ---

    async def claim(self, session: AsyncSession, job_id: str, lease: str) -> ClaimedRow | None:
        claimed = await JobStoreRepository.from_session(session).claim(job_id, utcnow(), lease)
        if claimed is not None:
            await record_job_transitions(session, started=[job_id])
        return claimed

    async def code(self, session: AsyncSession, function_version_id: str) -> CodeRow | None:
        code = await JobStoreRepository.from_session(session).code_of(function_version_id)
        if code is None:
            return None
        if code.dependencies:
            # Pinned at deployment and staged as they were pinned: no access check here
            # (contract 11; docs/packages.md, "Dependencies").
            code = replace(code, files=staged_files(code.files, code.dependencies))
        build = await BuildRepository.from_session(session).for_function_version(
            function_version_id
        )
        if build is None or build.docker_image is None:
            return code
        return replace(code, build_id=build.id, build_reference=build.docker_image)

    async def mark_pulled(self, session: AsyncSession, build_id: str) -> None:
        """A worker loaded the build's image: retention counts 90 days from the last pull."""
        await BuildRepository.from_session(session).mark_pulled(build_id, utcnow())

    async def blobs(self, session: AsyncSession, digests: list[str]) -> dict[str, bytes]:
        return await JobStoreRepository.from_session(session).blobs(digests)

    async def finish(self, session: AsyncSession, item: Finish) -> bool:
        done = await JobStoreRepository.from_session(session).finish(item, utcnow())
        if done:
            await record_job_transitions(session, ended=[item.job_id])
        return done

    async def claim_and_finish(
        self,
        session: AsyncSession,
        claims: list[str],
        finishes: list[Finish],
        lease: str,
    ) -> tuple[dict[str, ClaimedRow], set[str]]:
        """A batch of one worker process's transitions in one unit of work: the claimed rows
        (ids missing: another delivery has them; claimed under `lease`, the batch's token) and
        the ids this batch finished."""
        repository = JobStoreRepository.from_session(session)
        now = utcnow()
        finished = await repository.finish_many(finishes, now) if finishes else {}
        claimed = await repository.claim_many(claims, now, lease) if claims else {}
        if claimed:
            claimed = await self._refuse_lost_rights(session, repository, claimed, now)
        # Their events in the same commit, from what the UPDATEs returned: one INSERT. A job
        # refused at its claim never started: its event is its end.
        await record_rows(
            session,
            transition_rows((c for c in claimed.values() if not c.refused), finishes, finished),
        )
        refused = [c.job_id for c in claimed.values() if c.refused]
        if refused:
            await record_job_transitions(session, ended=refused)
        return claimed, set(finished)

    async def _refuse_lost_rights(
        self,
        session: AsyncSession,
        repository: JobStoreRepository,
        claimed: dict[str, ClaimedRow],
        now: datetime,
    ) -> dict[str, ClaimedRow]:
        """Access at every act (contract section 8b): a job waited in the queue since its
        owner's request, and the owner may have lost the right to execute its function version
        meanwhile (left the organization, the package went private). Checked in the claim's
        transaction, one statement per owner in the batch; a refused job is recorded failed
        with kind `permission_denied` there and then, and never runs."""
        by_owner: dict[str, set[str]] = {}
        for row in claimed.values():
            by_owner.setdefault(row.user_id, set()).add(row.function_version_id)
        refused = {
            owner: await access_service.refused_executions(session, owner, versions)
            for owner, versions in by_owner.items()
        }
        for job_id, row in list(claimed.items()):
            if row.function_version_id not in refused[row.user_id]:
                continue
            error = {
                "kind": "permission_denied",
                "message": "the job's owner may no longer execute function version "
                f"{row.function_version_id!r}: its package is not visible to them now",
            }
            await repository.finish(Finish(job_id, "failed", None, error, "", row.lease), now)
            claimed[job_id] = replace(row, refused=True)
        return claimed

    async def heartbeat(self, session: AsyncSession, leases: Collection[str]) -> int:
        """A worker process's sign of life for the jobs it runs (one statement)."""
        return await JobStoreRepository.from_session(session).heartbeat(list(leases), utcnow())

    async def release(self, session: AsyncSession, job_id: str, lease: str) -> bool:
        return await JobStoreRepository.from_session(session).release(job_id, lease)

    async def sweep(
        self,
        session: AsyncSession,
        *,
        stale_after: float,
        max_deliveries: int,
        stuck_after: float,
        heartbeat_timeout: float,
        waiting: Waiting,
        node_actor: str = RUN_ACTOR,
        now: datetime | None = None,
        limit: int = 500,
    ) -> SweepReport:
        """The sweeper's round. Every transition is guarded, so concurrent sweepers (one per
        worker process) make each once.

        - A `running` job whose heartbeat is older than `heartbeat_timeout` lost its worker:
          queued again under a new delivery (guarded by the old lease, which no longer
          records anything) and sent to `node_actor` (a workflow node's) or `jobs.run`;
          after `max_deliveries` deliveries it fails with `infrastructure_error`.
        - A `queued` job older than `stale_after` whose message the broker no longer holds
          was lost (a send that failed, a broker restarted without its data): sent again.
          A job whose message still waits in the queue, however long, is left alone: age
          alone says nothing when hundreds of jobs wait for a worker.
        - A `running` job with no heartbeat at all (claimed before heartbeats existed)
          fails after `stuck_after`, as before."""
        now = now or utcnow()
        repository = JobStoreRepository.from_session(session)
        report = SweepReport()
        for stalled in await repository.stalled_running(
            now - timedelta(seconds=heartbeat_timeout), limit
        ):
            if stalled.deliveries >= max_deliveries:
                error = {
                    "kind": "infrastructure_error",
                    "message": f"the worker running the job stopped, {stalled.deliveries} times",
                }
                if await repository.fail_stalled(stalled, error, now):
                    report.given_up.append(stalled.job_id)
            elif await repository.requeue_stalled(stalled):
                actor = node_actor if stalled.workflow_run_id is not None else RUN_ACTOR
                enqueue_job(actor, stalled.job_id, stalled.deliveries + 1)
                report.handed_over.append(stalled.job_id)
        queued = await repository.stale_queued(now - timedelta(seconds=stale_after), limit)
        ids = {job_id: job_message_id(job_id, d) for job_id, d, _, _ in queued}
        held = waiting(list(ids.values())) if queued else None
        lost = [] if held is None else [q for q in queued if ids[q[0]] not in held]
        for job_id, deliveries, _, run_id in lost:
            if deliveries >= max_deliveries:
                error = {
                    "kind": "infrastructure_error",
                    "message": f"the job's message was lost {deliveries} times",
                }
                if await repository.fail_queued(job_id, error, now):
                    report.given_up.append(job_id)
            elif await repository.count_delivery(job_id, deliveries):
                enqueue_job(node_actor if run_id is not None else RUN_ACTOR, job_id, deliveries + 1)
                report.resent.append(job_id)
        report = replace(report, waiting=len(queued) - len(lost) if held is not None else 0)
        stuck_error = {
            "kind": "infrastructure_error",
            "message": "the worker running the job stopped before recording its result",
        }
        report.stuck.extend(
            await repository.fail_stuck_running(
                now - timedelta(seconds=stuck_after), stuck_error, now
            )
        )
        await record_job_transitions(session, ended=[*report.given_up, *report.stuck])
        return report


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


job_store_service = JobStoreService()


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
