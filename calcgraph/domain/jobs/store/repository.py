"""The SQL of running jobs (the sweeper's is in `jobs/sweep`). Every state change is a
guarded UPDATE whose row count says whether this caller made the transition (a redelivered
message finds 0 rows).
Every transition that ends a job marks its run changed (`calcgraph.domain.runs.changes`): the
run's next tick has work; one that cannot name the run marks every run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Table,
    bindparam,
    null,
    select,
    update,
)
from sqlalchemy.orm import aliased

from calcgraph.db.base import JSONType, RepositoryBase, UTCDateTime
from calcgraph.db.dialect import locked
from calcgraph.domain.access.repository import (
    EXECUTION_FACTS_COLUMNS,
    ExecutionFacts,
    execution_facts_of,
    with_execution_facts,
)
from calcgraph.domain.functions.models import FunctionVersion
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.packages.models import (
    CodeBlob,
    Package,
    PackageVersion,
    PackageVersionDependency,
)
from calcgraph.domain.runs import changes


@dataclass(frozen=True)
class ClaimedRow:
    job_id: str
    function_version_id: str
    resolved_inputs: dict[str, Any]
    user_id: str
    """Whose job it is: the result cache is per user."""
    lease: str
    """The claim's token, which its finish (or release) presents."""
    function_id: str | None = None
    workflow_run_id: str | None = None
    node_key: str | None = None
    """What its `calcgraph.calculation.started` event says (from the claim's RETURNING)."""
    refused: bool = False
    """Its owner may no longer execute the function version: the claim recorded the job
    failed with kind `permission_denied`; the worker runs nothing."""
    facts: ExecutionFacts | None = None
    """What the owner's right to execute is decided on, when the claim read it (PostgreSQL:
    `facts_read`); None there: no such function version."""
    facts_read: bool = False


@dataclass(frozen=True)
class CodeRow:
    """What a worker needs to stage and start a function version."""

    function_version_id: str
    handler: str
    outputs_schema: dict[str, Any] | None
    files: dict[str, str]
    """Path to SHA-256 of its content in `code_blobs`."""
    build_id: str | None = None
    build_reference: str | None = None
    """`docker:<image>` or `artifact:<sha256>` of the newest successful build, when the
    version was built from submitted code (POST /functions): its dependencies live there."""
    resources: dict[str, Any] | None = None
    """The version's declared limits (contract 11); None: the worker's."""
    dependencies: tuple[tuple[str, dict[str, str]], ...] = ()
    """The pinned dependency closure of the deployment that created the version (contract
    11): each package's name and files, staged beside `files` under its import name."""


@dataclass(frozen=True)
class Finish:
    """One `running -> success/failed` transition, as a batch of them carries it."""

    job_id: str
    outcome: Outcome
    lease: str
    """The claim's token: the transition happens only while the job is still this claim's."""


def _rows(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


# The worker's hot path: Core statements built once (no ORM DML compile, no per-call statement
# construction or cache-key walk), on the table rather than the mapped class.
_JOBS = cast(Table, Job.__table__)
_CLAIM_MANY = (
    update(_JOBS)
    .where(_JOBS.c.id.in_(bindparam("ids", expanding=True)), _JOBS.c.status == "queued")
    .values(
        status="running",
        started_at=bindparam("now", type_=UTCDateTime()),
        heartbeat_at=bindparam("now", type_=UTCDateTime()),
        lease=bindparam("b_lease"),
    )
    .returning(
        _JOBS.c.id,
        _JOBS.c.function_version_id,
        _JOBS.c.resolved_inputs,
        _JOBS.c.user_id,
        _JOBS.c.function_id,
        _JOBS.c.workflow_run_id,
        _JOBS.c.node_key,
    )
)
# PostgreSQL: the claim and its owners' execution facts in one statement (the UPDATE as a
# data-modifying CTE, each claimed row joined to its facts): a worker's claim asked them in a
# statement of its own. SQLite has no such CTE: the facts are read apart, as before.
_CLAIMED = _CLAIM_MANY.cte("claimed")
_CLAIM_MANY_WITH_FACTS = with_execution_facts(
    select(*_CLAIMED.c), _CLAIMED.c.function_version_id, _CLAIMED.c.user_id
)
# Only the delivery holding the lease records the result: a worker the sweeper gave up on
# (slow, not dead) finds 0 rows instead of writing over the attempt that replaced it.
_FINISH_WHERE = (
    _JOBS.c.id == bindparam("job_id"),
    _JOBS.c.status == "running",
    _JOBS.c.lease == bindparam("b_lease"),
)
# outputs on a success, error on a failure; the other stays SQL NULL (not JSON null).
_FINISH_SUCCESS = (
    update(_JOBS)
    .where(*_FINISH_WHERE)
    .values(
        status="success",
        outputs=bindparam("outputs", type_=JSONType),
        error=null(),
        logs=bindparam("logs"),
        finished_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(_JOBS.c.workflow_run_id, _JOBS.c.node_key)
)
_FINISH_FAILED = (
    update(_JOBS)
    .where(*_FINISH_WHERE)
    .values(
        status="failed",
        outputs=null(),
        error=bindparam("error", type_=JSONType),
        logs=bindparam("logs"),
        finished_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(_JOBS.c.workflow_run_id, _JOBS.c.node_key)
)


class JobStoreRepository(RepositoryBase[Job]):
    model = Job

    async def claim(self, job_id: str, now: datetime, lease: str) -> ClaimedRow | None:
        """queued -> running; None when another delivery got there first (or it is done)."""
        # RETURNING (SQLite >= 3.35 and PostgreSQL): the claim and its data in one statement;
        # no row returned is the row count 0 of a lost race.
        row = (
            await self.session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == "queued")
                .values(status="running", started_at=now, heartbeat_at=now, lease=lease)
                .returning(Job.function_version_id, Job.resolved_inputs, Job.user_id)
                .execution_options(synchronize_session=False)
            )
        ).first()
        if row is None:
            return None
        return ClaimedRow(job_id, row[0], row[1], row[2], lease)

    async def claim_many(
        self, job_ids: Iterable[str], now: datetime, lease: str
    ) -> dict[str, ClaimedRow]:
        """queued -> running for every id still queued, in one statement, under one lease (a
        token of this batch of claims: unique per delivery, as a job is claimed once per
        batch); the ids missing from the answer were claimed (or finished) by another
        delivery. On PostgreSQL each claimed row comes with its owner's execution facts
        (`ClaimedRow.facts`), read in the same statement."""
        ids = sorted(set(job_ids))  # one lock order for every claimer
        if not ids:
            return {}
        with_facts = self.session.get_bind().dialect.name == "postgresql"
        rows = await self.session.execute(
            _CLAIM_MANY_WITH_FACTS if with_facts else _CLAIM_MANY,
            {"ids": ids, "now": now, "b_lease": lease},
        )
        return {row[0]: claimed_row(row, lease, with_facts) for row in rows}

    async def finish_many(
        self, finishes: Sequence[Finish], now: datetime
    ) -> dict[str, tuple[str | None, str | None]]:
        """running -> success/failed for each, once; the ids this call transitioned, each with
        its run and node (what its event says)."""
        done: dict[str, tuple[str | None, str | None]] = {}
        for item in sorted(finishes, key=lambda f: f.job_id):
            params: dict[str, Any] = {
                "job_id": item.job_id,
                "logs": item.outcome.logs,
                "now": now,
                "b_lease": item.lease,
            }
            if item.outcome.status == "success":
                statement, params["outputs"] = _FINISH_SUCCESS, item.outcome.outputs
            else:
                statement, params["error"] = _FINISH_FAILED, item.outcome.error
            row = (await self.session.execute(statement, params)).first()
            if row is not None:
                done[item.job_id] = (row[0], row[1])
                changes.changed(row[0])
        return done

    async def code_of(self, function_version_id: str) -> CodeRow | None:
        row = (
            await self.session.execute(
                select(
                    FunctionVersion.handler,
                    FunctionVersion.outputs_schema,
                    PackageVersion.files,
                    FunctionVersion.resources,
                    FunctionVersion.package_version_id,
                )
                .join(PackageVersion, PackageVersion.id == FunctionVersion.package_version_id)
                .where(FunctionVersion.id == function_version_id)
            )
        ).first()
        if row is None:
            return None
        pinned = aliased(PackageVersion)
        dependencies = await self.session.execute(
            select(Package.name, pinned.files)
            .select_from(PackageVersionDependency)
            .join(pinned, pinned.id == PackageVersionDependency.dependency_version_id)
            .join(Package, Package.id == pinned.package_id)
            .where(PackageVersionDependency.package_version_id == row[4])
            .order_by(Package.name)
        )
        return CodeRow(
            function_version_id,
            row[0],
            row[1],
            dict(row[2] or {}),
            resources=row[3],
            dependencies=tuple((name, dict(files or {})) for name, files in dependencies),
        )

    async def blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        rows = await self.session.execute(
            select(CodeBlob.sha256, CodeBlob.content).where(CodeBlob.sha256.in_(wanted))
        )
        return {sha: bytes(content) for sha, content in rows}

    async def _transition(self, where: tuple[ColumnElement[bool], ...], **values: Any) -> bool:
        """One guarded UPDATE of a job: True when this caller changed the row, False when
        `where` no longer holds (another delivery, worker or sweeper got there first)."""
        result = await self.session.execute(
            update(Job).where(*where).values(**values).execution_options(synchronize_session=False)
        )
        return _rows(result) == 1

    async def finish(self, item: Finish, now: datetime) -> bool:
        """running -> success/failed, once, by the delivery holding the lease."""
        row = (
            await self.session.execute(
                update(Job)
                .where(Job.id == item.job_id, Job.status == "running", Job.lease == item.lease)
                .values(
                    status=item.outcome.status,
                    outputs=item.outcome.outputs,
                    error=item.outcome.error,
                    logs=item.outcome.logs,
                    finished_at=now,
                )
                .returning(Job.workflow_run_id)
                .execution_options(synchronize_session=False)
            )
        ).first()
        if row is None:
            return False
        changes.changed(row[0])
        return True

    async def release(self, job_id: str, lease: str) -> bool:
        """running -> queued, for a retry after an infrastructure failure (its own only)."""
        return await self._transition(
            (Job.id == job_id, Job.status == "running", Job.lease == lease),
            status="queued",
            started_at=None,
            lease=None,
            heartbeat_at=None,
        )

    async def heartbeat(self, leases: Sequence[str], now: datetime) -> int:
        """One worker process's sign of life for every job it runs, in one statement.

        Its rows are locked in id order, the order `claim_many` and `finish_many` lock theirs:
        an UPDATE by lease locked them in the order of its plan, and met a batch finishing the
        same jobs in a deadlock (PostgreSQL aborted the heartbeat, and the leases went
        unrenewed until the next beat)."""
        if not leases:
            return 0
        running = (
            select(Job.id)
            .where(Job.status == "running", Job.lease.in_(sorted(set(leases))))
            .order_by(Job.id)
        )
        running = locked(self.session.get_bind().dialect.name, running)
        result = await self.session.execute(
            update(Job)
            .where(Job.id.in_(running.scalar_subquery()), Job.status == "running")
            .values(heartbeat_at=now)
            .execution_options(synchronize_session=False)
        )
        return _rows(result)

    # --- run control (contract section 10) ---

    async def cancel(
        self,
        error: dict[str, Any],
        now: datetime,
        *,
        job_id: str | None = None,
        run_id: str | None = None,
    ) -> list[str]:
        """queued/running -> failed with `error` (kind `cancelled`), for one job or every
        unfinished job of a run (by the (run, node, attempt) key's index); the ids changed. A
        worker running one finds its lease no longer records anything, and its cancel watch
        kills the sandbox."""
        where: list[ColumnElement[bool]] = [Job.status.in_(("queued", "running"))]
        if job_id is not None:
            where.append(Job.id == job_id)
        if run_id is not None:
            where.append(Job.workflow_run_id == run_id)
        rows = await self.session.execute(
            update(Job)
            .where(*where)
            .values(status="failed", outputs=null(), error=error, finished_at=now, lease=None)
            .returning(Job.id, Job.workflow_run_id)
            .execution_options(synchronize_session=False)
        )
        ended = rows.all()
        changes.changed(*(row[1] for row in ended))
        return sorted(row[0] for row in ended)

    async def not_running(self, job_ids: Sequence[str]) -> set[str]:
        """Of these jobs (a worker's running ones), those whose row says they no longer run
        there: cancelled, handed over or failed by the sweeper. Ids without a row yet (a chain
        link not recorded) are not among them."""
        if not job_ids:
            return set()
        rows = await self.session.execute(
            select(Job.id).where(Job.id.in_(sorted(set(job_ids))), Job.status != "running")
        )
        return {row[0] for row in rows}


def claimed_row(row: Any, lease: str, with_facts: bool) -> ClaimedRow:
    """A claim statement's row (the job's id, function version, inputs and owner, then its
    function, run and node; the owner's execution facts last when `with_facts`), claimed
    under `lease`."""
    facts = execution_facts_of(row[-EXECUTION_FACTS_COLUMNS:]) if with_facts else None
    return ClaimedRow(
        row[0],
        row[1],
        row[2],
        row[3],
        lease,
        row[4],
        row[5],
        row[6],
        facts=facts,
        facts_read=with_facts,
    )
