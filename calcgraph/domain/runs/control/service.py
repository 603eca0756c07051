"""Run control (contract section 10): cancel a run or a job, re-run a finished run.

- **Cancel a run** is a tick: the cancelling tick (`RunService.tick(cancel=True)`) takes the
  run's lock (waiting for a tick under way rather than answering past it), refuses a run that
  ended (Conflict), and the pure tick cancels every pending and running node and the run. Then,
  in the same unit of work, every unfinished job of the run ends `failed` with kind `cancelled`
  (one guarded UPDATE: a job that finished first keeps its outputs, and its node stays
  cancelled). The workers running those jobs learn it from the database within
  `job_cancel_check_seconds` and kill the sandboxes (`calcgraph.workers.cancel`); a chain
  worker's next record finds its job ended and stops before its next node; later ticks find
  nothing to change. Access: whoever may see the run (its owner, admins), as `GET` says.
- **Cancel a job**: a `queued` or `running` job of the caller's (admins: anyone's) ends
  `failed`, kind `cancelled`; a job of a run is then reconciled by the next tick as any failure.
- **Re-run** creates a new run (`rerun_of`) of the same or the latest workflow version with the
  original inputs and the given overrides, through run creation (its checks, 403 and 422
  included); from `failure`, nodes whose function version and resolved inputs equal those of a
  node that succeeded in the original run start `success` (`rerun.reused_states`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import Conflict, FieldError, NotFound, ValidationError, found
from calcgraph.domain.events.service import events_at_commit, record_job_transitions
from calcgraph.domain.jobs.cache_key import REFRESH
from calcgraph.domain.jobs.service import job_read_service
from calcgraph.domain.jobs.store.repository import JobStoreRepository
from calcgraph.domain.jobs.views import JobView
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.rerun import reused_states
from calcgraph.domain.runs.service import RunOrder, run_service
from calcgraph.domain.runs.state import RUN_TERMINAL, NodeState
from calcgraph.domain.runs.views import RunView
from calcgraph.domain.workflows.planner import Plan
from calcgraph.domain.workflows.repository import WorkflowRepository, version_view
from calcgraph.domain.workflows.service import workflow_service

RerunFrom = Literal["failure", "start"]
RerunVersion = Literal["same", "latest"]
RERUN_FROM: tuple[str, ...] = ("failure", "start")
RERUN_VERSIONS: tuple[str, ...] = ("same", "latest")


def cancelled_error(what: str) -> dict[str, str]:
    return {"kind": "cancelled", "message": f"{what} was cancelled"}


class RunControl:
    async def cancel_run(self, session: AsyncSession, principal: Principal, run_id: str) -> RunView:
        # The cancelling tick records `calcgraph.run.cancelled` as any tick records the run's
        # end; the jobs it stops end here, each with its `calcgraph.job.failed`. All are
        # written after the jobs' rows are locked, at the commit: the sequencer's row last.
        events_at_commit(session)
        view = await run_service.tick(session, principal, run_id, REFRESH, cancel=True)
        stopped = await JobStoreRepository.from_session(session).cancel(
            cancelled_error(f"workflow run {run_id!r}"), utcnow(), run_id=run_id
        )
        await record_job_transitions(session, ended=stopped)
        return view

    async def cancel_job(self, session: AsyncSession, principal: Principal, job_id: str) -> JobView:
        job = await job_read_service.get_job(session, principal, job_id)  # 404/403 as GET says
        if job.user_id != principal.user_id and not principal.is_admin:
            raise NotFound(f"no job {job_id!r}")
        if job.status not in ("queued", "running"):
            raise Conflict(f"job {job_id!r} is {job.status} already: it cannot be cancelled")
        changed = await JobStoreRepository.from_session(session).cancel(
            cancelled_error(f"job {job_id!r}"), utcnow(), job_id=job_id
        )
        if not changed:
            raise Conflict(f"job {job_id!r} finished meanwhile: it cannot be cancelled")
        await record_job_transitions(session, ended=changed)
        return await job_read_service.get_job(session, principal, job_id)

    async def stopped(self, session: AsyncSession, jobs: Mapping[str, str | None]) -> set[str]:
        """Of the jobs a worker runs (job id -> run id), those to stop: their row no longer
        runs (cancelled, or taken from this worker), or their run was cancelled."""
        found = await JobStoreRepository.from_session(session).not_running(list(jobs))
        runs = {run_id for run_id in jobs.values() if run_id is not None}
        cancelled = await RunRepository.from_session(session).cancelled_runs(runs)
        return found | {job_id for job_id, run_id in jobs.items() if run_id in cancelled}

    async def rerun(
        self,
        session: AsyncSession,
        principal: Principal,
        run_id: str,
        *,
        start_from: str = "failure",
        workflow_version: str = "same",
        inputs: object = None,
    ) -> RunView:
        if start_from not in RERUN_FROM:
            raise _refused("from", start_from, RERUN_FROM)
        if workflow_version not in RERUN_VERSIONS:
            raise _refused("workflow_version", workflow_version, RERUN_VERSIONS)
        if inputs is not None and not isinstance(inputs, Mapping):
            raise ValidationError(
                "inputs must be an object of input overrides",
                [FieldError(("body", "inputs"), "expected an object keyed by input node_key")],
            )
        # A tick first: a failed run's nodes still running when it failed are reconciled by
        # later ticks, and a node that succeeded since is reused like the others.
        original = await run_service.tick(session, principal, run_id, REFRESH)
        if original.status not in RUN_TERMINAL:
            raise Conflict(
                f"workflow run {run_id!r} is {original.status}: only a finished run is re-run"
            )
        workflows = WorkflowRepository.from_session(session)
        workflow = found(
            await workflows.view_by_id(original.workflow_id), f"workflow run {run_id!r}"
        )
        workflow = await workflow_service.visible(session, principal, workflow.slug)
        if workflow_version == "same":
            versions = await workflow_service.versions_by_id(
                session, [original.workflow_version_id]
            )
            version = versions[original.workflow_version_id]
        else:
            row = await workflows.version(workflow.id, workflow.latest_version)
            assert row is not None
            version = version_view(row)
        merged: dict[str, Any] = {**original.inputs, **dict(inputs or {})}
        reuse = None
        if start_from == "failure":
            before = Plan.from_dict(original.plan_snapshot)
            # Read whole: the tick's answer of an ended run leaves outputs over 64 KiB out,
            # and a reused node keeps its outputs.
            repository = RunRepository.from_session(session)
            states: Mapping[str, NodeState] = await repository.states(run_id)
            resolved_before = await repository.resolved_inputs(run_id)

            def reuse(plan: Plan, resolved: Mapping[str, Any]) -> Mapping[str, NodeState]:
                return reused_states(plan, resolved, before, states, resolved_before)

        order = RunOrder(workflow.slug, version, merged, rerun_of=run_id)
        return await run_service.start(session, principal, order, reuse=reuse)


def _refused(name: str, value: object, allowed: tuple[str, ...]) -> ValidationError:
    expected = f"one of {', '.join(allowed)}"
    return ValidationError(
        f"{name} must be {expected}, not {value!r}", [FieldError(("body", name), expected)]
    )


run_control = RunControl()
