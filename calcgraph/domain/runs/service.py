"""Workflow runs: create (inputs checked, version and plan frozen), read, list, and the tick.

The tick is one unit of work: lock the run row, read every node state and the results of the
jobs running nodes wait on, call the pure `tick`, write only the changed node rows and the run
fields (bumping `revision` when anything changed), and create the submitted jobs through the
execution path, whose messages leave after the commit. Of concurrent ticks of one run (in one
process or several), one takes the lock and advances the run; the others do not wait for it
holding a pooled connection (SKIP LOCKED) but answer the run as committed, so none submits
anything twice; the jobs' unique (run, node, attempt) key backs that up. A chain worker takes
the same lock, and a tick meeting it answers the same way.

Decisions where the specification and contract are silent:
- Creating a run needs the workflow visible to the caller and every function version it runs
  visible too (so a public workflow cannot run someone's private code); the run's jobs are
  the caller's. Every input node needs a value; unknown keys are refused.
- A run is readable, and tickable, by its creator and admins while its workflow stays visible
  (the jobs rule). The creation response has status `pending`: nothing runs before a tick.
- The run's jobs run on its owner's behalf, so each tick checks the owner's right to execute
  the function versions it is about to submit, then and there (the access policy's
  `can_execute`): a node whose package went private, or whose organization the owner left,
  fails with kind `permission_denied` and the run fails, whoever ticks (an admin included).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access import policy
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import (
    Conflict,
    FieldError,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from calcgraph.domain.events.service import record_run
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.jobs.cache_key import REFRESH, ResultLookup
from calcgraph.domain.jobs.enqueue import RUN_ACTOR
from calcgraph.domain.jobs.inputs import refuse_mismatches
from calcgraph.domain.jobs.submission.service import NodeJob, job_submission_service
from calcgraph.domain.listing.filters import TimeRange
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.runs import changes
from calcgraph.domain.runs.chains.service import CHAIN_ACTOR
from calcgraph.domain.runs.changes import Token
from calcgraph.domain.runs.listing.repository import RunListRepository
from calcgraph.domain.runs.memo import KeptAnswer, RunMemo
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.repository import RunRepository, WorkflowFacts, run_view
from calcgraph.domain.runs.state import (
    RUN_TERMINAL,
    JobResult,
    NodeState,
    RunState,
    TickResult,
    initial_states,
)
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.runs.views import NodeRow, RunView
from calcgraph.domain.types.expr import TypeExprError, from_json
from calcgraph.domain.types.values import normalize
from calcgraph.domain.workflows.graph import InputNode, parse_graph
from calcgraph.domain.workflows.planner import Plan, plan
from calcgraph.domain.workflows.repository import WorkflowRepository, version_view
from calcgraph.domain.workflows.retry import from_dict as retry_from_dict
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowVersionView

Reuse = Callable[[Plan, Mapping[str, Any]], Mapping[str, NodeState]]
"""A re-run's rule: given the new run's plan and resolved inputs, the nodes that start
`success` with another run's results."""

RUN_STATUSES = ("pending", "running", "completed", "failed", "cancelled")


def _check_since(since: int | None, revision: int) -> None:
    if since is not None and not 0 <= since <= revision:
        raise ValidationError(
            f"since must be a revision of this run, from 0 to {revision}",
            [FieldError(("query", "since"), f"expected an integer from 0 to {revision}")],
        )


def resolve_run_inputs(graph_inputs: Sequence[InputNode], inputs: object) -> dict[str, Any]:
    """The run's inputs in SI, or ValidationError naming every input that does not match."""
    loc = ("body", "inputs")
    if not isinstance(inputs, Mapping):
        raise ValidationError(
            "inputs must be an object keyed by input node_key",
            [FieldError(loc, "expected an object keyed by input node_key")],
        )
    errors: list[FieldError] = []
    known = {node.node_key: node for node in graph_inputs}
    for key in inputs:
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            errors.append(FieldError((*loc, str(key)), f"unknown input (inputs: {listed})"))
    resolved: dict[str, Any] = {}
    for key, node in known.items():
        if key not in inputs:
            errors.append(FieldError((*loc, key), "required input is missing"))
            continue
        try:
            expr = from_json(node.type_expr)
        except TypeExprError as exc:  # refused when the version was saved; an old row may hold one
            errors.append(FieldError((*loc, key), f"the input's type is invalid: {exc}"))
            continue
        try:
            resolved[key] = normalize(inputs[key], expr, (*loc, key))
        except ValidationError as exc:
            errors.extend(exc.errors)
    refuse_mismatches(errors, "the workflow's input nodes")
    return resolved


DEFAULT_QUOTAS = Quotas()


class RunService:
    def __init__(self) -> None:
        self.memo = RunMemo()

    async def create(
        self,
        session: AsyncSession,
        principal: Principal,
        slug: str,
        inputs: object,
        *,
        refresh: bool = False,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> RunView:
        """A run of the workflow's latest version; `refresh`: its jobs are never answered from
        the result cache (contract section 10)."""
        workflow = await workflow_service.visible(session, principal, slug)
        await quota_service.require_run_room(session, principal, quotas)
        version = await WorkflowRepository.from_session(session).version(
            workflow.id, workflow.latest_version
        )
        assert version is not None
        return await self.start(
            session,
            principal,
            slug,
            workflow.id,
            version_view(version),
            inputs,
            refresh=refresh,
        )

    async def start(
        self,
        session: AsyncSession,
        principal: Principal,
        slug: str,
        workflow_id: str,
        version: WorkflowVersionView,
        inputs: object,
        *,
        refresh: bool = False,
        reuse: Reuse | None = None,
        rerun_of: str | None = None,
    ) -> RunView:
        """Create a run of `version` (run creation and re-run): inputs checked, plan frozen,
        every function version a node will run visible to the caller. `reuse` gives the nodes
        that start `success` from another run (a re-run from failure): they run nothing, so
        they need no access."""
        graph = parse_graph(version.graph)
        resolved = resolve_run_inputs([n for n in graph.nodes if isinstance(n, InputNode)], inputs)
        assert isinstance(inputs, dict)
        frozen = await self._with_retry_defaults(
            RunRepository.from_session(session), plan(graph, version.resolved_functions)
        )
        states = initial_states(frozen)
        if reuse is not None:
            states.update(reuse(frozen, resolved))
        needed = sorted(
            {
                n.function_version_id
                for key, n in frozen.nodes.items()
                if n.function_version_id and states[key].status != "success"
            }
        )
        visible = await function_version_service.visible_versions_by_id(session, principal, needed)
        hidden = [v for v in needed if v not in visible]
        if hidden:
            raise PermissionDenied(
                policy.denial(f"workflow {slug!r}: it runs functions that are not visible to you")
            )
        run = WorkflowRun(
            id=new_id(),
            workflow_id=workflow_id,
            workflow_version_id=version.id,
            user_id=principal.user_id,
            status="pending",
            inputs=inputs,
            resolved_inputs=resolved,
            plan_snapshot=frozen.as_dict(),
            revision=0,
            started_at=utcnow(),
            rerun_of=rerun_of,
            cache_refresh=refresh,
        )
        repository = RunRepository.from_session(session)
        await repository.add(run)
        await repository.add_node_states(
            run.id, {key: node.kind for key, node in frozen.nodes.items()}
        )
        started = {key: state for key, state in states.items() if state.status != "pending"}
        await repository.write_states(run.id, started, 0)
        await record_run(session, run.id, slug, "pending")
        changes.changed(run.id)
        # Remembered before the commit, which is harmless here: if it rolls back, no tick can
        # ever find this run id; if it commits, these are exactly its plan and revision-0 states.
        self.memo.remember_plan(run.id, run.plan_snapshot, frozen)
        self.memo.remember_states(run.id, 0, states)
        return run_view(run, states)

    async def _with_retry_defaults(self, repository: RunRepository, frozen: Plan) -> Plan:
        """The plan with each function node that carries no retry policy given its function's
        manifest default, frozen into the run with the rest of the plan."""
        bare = {
            n.function_version_id
            for n in frozen.nodes.values()
            if n.kind == "function" and n.retry is None and n.function_version_id
        }
        defaults = await repository.retry_defaults(bare)
        if not defaults:
            return frozen
        nodes = {
            key: replace(node, retry=retry_from_dict(defaults[node.function_version_id]))
            if node.retry is None and node.function_version_id in defaults
            else node
            for key, node in frozen.nodes.items()
        }
        return Plan(frozen.chains, frozen.waves, nodes, frozen.input_keys)

    async def get(
        self,
        session: AsyncSession,
        principal: Principal,
        run_id: str,
        *,
        states: bool = True,
        plan: bool = True,
    ) -> RunView:
        """The run; its node states too unless `states` is false (then only when remembered:
        GraphQL reads them a page at a time), its plan unless `plan` is false (then the plan
        snapshot is empty: GraphQL reads it, megabytes at 10,000 nodes, when a field needs it)."""
        repository = RunRepository.from_session(session)
        found = await repository.locked_run(run_id, lock=False)
        if found is None:
            raise NotFound(f"no workflow run {run_id!r}")
        run, facts = found
        await self._ensure_visible(session, principal, run, facts)
        remembered = self.memo.plan(run_id)
        snapshot: dict[str, Any] = {}
        if plan:
            snapshot = (
                remembered[0] if remembered is not None else await repository.plan_snapshot(run_id)
            )
        # States remembered at this revision are committed ones; states read here are not
        # remembered: without the run's lock a tick may commit between the two reads.
        node_states = self.memo.states(run_id, run.revision)
        if node_states is None and states:
            node_states = await repository.states(run_id)
        return run_view(run, node_states, snapshot)

    async def list_runs(
        self,
        session: AsyncSession,
        principal: Principal,
        page: PageRequest,
        statuses: Sequence[str] = (),
        workflow_slug: str | None = None,
        *,
        started_after: str | None = None,
        started_before: str | None = None,
    ) -> Page[RunView]:
        """The caller's runs, narrowed by statuses, a workflow and a start time range."""
        started = TimeRange.parse(started_after, started_before, "started")
        unknown = [s for s in statuses if s not in RUN_STATUSES]
        if unknown:
            raise ValidationError(
                f"unknown run status {unknown[0]!r}",
                [FieldError(("query", "status"), f"one of {', '.join(RUN_STATUSES)}")],
            )
        workflow_id = None
        if workflow_slug is not None:
            workflow_id = (await workflow_service.visible(session, principal, workflow_slug)).id
        return await RunListRepository.from_session(session).list_visible(
            principal, page.limit, page.after, statuses, workflow_id, started
        )

    async def tick(
        self,
        session: AsyncSession,
        principal: Principal,
        run_id: str,
        cache: ResultLookup,
        *,
        chains: bool = False,
        since: int | None = None,
        cancel: bool = False,
        quotas: Quotas = DEFAULT_QUOTAS,
        token: Token | None = None,
    ) -> RunView:
        """One advance of the run (reconcile, submit, finalise), in the caller's one commit.
        `cancel`: the tick that cancels the run (`control.service`): it waits for the run's
        lock rather than answering the run as another unit of work left it, and refuses a run
        that already ended (Conflict).
        `chains`: submit a chain's remaining nodes as one chain job (settings' chain_execution).
        `since`: answer only the node states changed after that revision (and no plan).
        `quotas`: the owner's queued jobs stay within `queued_jobs` (contract 8b): the ready
        nodes past the room stay pending and are deferred (the pure tick's `room`).
        `token`: the run's change token, read before this unit of work began: an answer
        that changes nothing is kept under it (`kept`).

        A tick that finds no finished job to reconcile, on a run ticked before, changes
        nothing: the previous tick submitted every node that was ready (and evaluated every
        ready extract), so no pending node can have become ready since, unless a chain worker
        started one's job (listed in `chain_starts` until a tick adopts it). That tick reads
        the run row, the jobs of its running nodes and the chain starts, by key or index, and
        neither the plan nor the node states unless it must answer them: its cost does not
        grow with the run, in this process's memo or not."""
        repository = RunRepository.from_session(session)
        locked = await repository.locked_run(run_id, skip_locked=not cancel)
        if locked is None:
            if cancel:
                raise NotFound(f"no workflow run {run_id!r}")
            return await self._busy(repository, principal, run_id, since)
        run, facts = locked
        await self._ensure_visible(session, principal, run, facts)
        if cancel and run.status in RUN_TERMINAL:
            raise Conflict(
                f"workflow run {run_id!r} is {run.status} already: it cannot be cancelled"
            )
        _check_since(since, run.revision)
        now = utcnow()
        due = run.retry_at is not None and run.retry_at <= now
        if run.revision > 0 and self.memo.revision(run_id) == 0:
            self.memo.forget_states(run_id)  # ticked elsewhere: `unchanged` reads it again
        # Chain starts whatever this tick's mode: a run may have chain jobs from an earlier
        # setting. One statement with the finished results: a round trip less per tick.
        results, started = await repository.work(run_id)
        if started:
            changes.changed(run_id)  # its chain starts adopted: they are no longer work
        if (
            not results
            and not started
            and not due
            and not cancel
            and (run.revision > 0 or run.status in RUN_TERMINAL)
        ):
            view = await self._view(repository, run, since)
            self._keep(token, run, facts, since, view)
            return view
        snapshot, frozen = await self._plan(repository, run_id)
        states = self.memo.states(run_id, run.revision)
        if states is None:
            states = await repository.states(run_id)
            self.memo.remember_states(run_id, run.revision, states)
        before = RunState(
            status=run.status,  # type: ignore[arg-type]
            completed_at=run.completed_at,
            terminal_outputs=run.terminal_outputs,
            error_message=run.error_message,
            first_failed_node_key=run.first_failed_node_key,
            retry_at=run.retry_at,
        )

        room: int | None = None

        def advance(
            refused: frozenset[str] = frozenset(), results: Mapping[str, JobResult] = results
        ) -> TickResult:
            return tick(
                frozen,
                before,
                states,
                results,
                run.resolved_inputs,
                now,
                lambda _: new_id(),
                started=started,
                chains=chains,
                refused=refused,
                cancel=cancel,
                room=room,
            )

        result = advance()
        if result.jobs:
            # The owner's queued jobs, counted now (one indexed count, only when submitting).
            room = await quota_service.job_room(session, run.user_id, quotas)
            if len(result.jobs) > room:
                result = advance()
        adopted = _adopted_outputs(frozen, result, results)
        if result.jobs or adopted:
            # Access at every act: the owner's right to execute what this tick would submit,
            # and what the jobs whose outputs it would copy into the run ran, now, in one
            # statement over those versions (not the run's); a refusal is rare, and the pure
            # tick is run again with it. A job that finished after its owner lost the right
            # is reconciled as failed `permission_denied`: none of its outputs reach the run.
            refused = await access_service.refused_executions(
                session,
                run.user_id,
                {j.function_version_id for j in result.jobs if j.function_version_id}
                | set(adopted.values()),
            )
            if refused:
                lost = {job for job, version in adopted.items() if version in refused}
                result = advance(refused, {**results, **_refusals(lost, results)})
        if not result.changed:
            view = await self._view(repository, run, since, states, snapshot)
            self._keep(token, run, facts, since, view)
            return view
        changes.changed(run_id)
        self.memo.changed_here(run_id)
        revision = run.revision
        await repository.write_states(run_id, result.nodes, revision + 1)
        after = result.run
        await repository.write_run(
            run,
            {
                "status": after.status,
                "completed_at": after.completed_at,
                "terminal_outputs": (
                    None if after.terminal_outputs is None else dict(after.terminal_outputs)
                ),
                "error_message": after.error_message,
                "first_failed_node_key": after.first_failed_node_key,
                "retry_at": after.retry_at,
                "revision": revision + 1,
            },
        )
        if result.jobs:
            await job_submission_service.submit_node_jobs(
                session,
                await self._node_jobs(repository, run, result),
                REFRESH if run.cache_refresh else cache,
            )
        if after.status in RUN_TERMINAL and before.status not in RUN_TERMINAL:
            workflow = await WorkflowRepository.from_session(session).get(run.workflow_id)
            await record_run(
                session,
                run_id,
                workflow.slug if workflow is not None else run.workflow_id,
                after.status,
                after.first_failed_node_key,
                after.terminal_outputs,
            )
        new_states = {**states, **result.nodes}
        if after.status in RUN_TERMINAL:
            repository.after_commit(lambda: self.memo.forget(run_id))
        else:
            repository.after_commit(
                lambda: self.memo.remember_states(run_id, revision + 1, new_states)
            )
        return await self._view(repository, run, since, new_states, snapshot)

    def kept(
        self, principal: Principal, run_id: str, token: Token, since: int | None
    ) -> RunView | None:
        """The run as a tick would answer it, without the database: what a tick that changed
        nothing answered under the run's current change `token` (no unit of work changed the
        run since), when the caller may see the run on the facts kept with it without a read
        (their role in an organization does not count), and no retry is due. None otherwise:
        the caller's tick reads the database, and refuses there what it refuses."""
        kept = self.memo.answer(run_id, token, time.monotonic())
        if kept is None:
            return None
        view = kept.views.get(since)
        if view is None:
            return None
        if not access_service.allowed_without_reads(
            principal, "see_run", kept, submitted_by=kept.user_id
        ):
            return None
        if kept.retry_at is not None and kept.retry_at <= utcnow():
            return None
        return view

    def changed_elsewhere(self, run_id: str, token: Token) -> bool:
        """Whether another unit of work than this process's ticks changed the run since a
        tick kept its answer (a job ended, most likely): its tick then goes straight to the
        run's lock, without the unlocked read that would find that work first."""
        return self.memo.changed_elsewhere(run_id, token)

    def _keep(
        self,
        token: Token | None,
        run: WorkflowRun,
        facts: WorkflowFacts,
        since: int | None,
        view: RunView,
    ) -> None:
        if token is None:
            return
        kept = KeptAnswer(
            token,
            run.user_id,
            facts.owner_id,
            facts.organization_id,
            facts.visibility,
            run.retry_at,
            time.monotonic(),
        )
        self.memo.keep_answer(run.id, kept, since, view)

    async def unchanged(
        self,
        session: AsyncSession,
        principal: Principal,
        run_id: str,
        *,
        since: int | None = None,
        token: Token | None = None,
    ) -> RunView | None:
        """The run as a tick would answer it, when that tick would change nothing (see `tick`),
        read without the run's lock or a write transaction: one statement, plus the changed
        states with `since`. None when the tick has work, or when it would read node states
        this process does not remember (the locked tick remembers them for the next one).
        The answer is kept under `token` (`kept`)."""
        if self.memo.revision(run_id) == 0:
            # Created in this process and not ticked here since: its first tick has work (it
            # submits every ready node), so the locked tick reads the run itself, one read
            # less (the 500 first ticks of 500 new runs come at once). Only a hint: a run
            # another process ticked is found so under the lock, which spends the hint.
            return None
        repository = RunRepository.from_session(session)
        found = await repository.run_with_work(run_id)
        if found is None:
            raise NotFound(f"no workflow run {run_id!r}")
        run, facts, work = found
        await self._ensure_visible(session, principal, run, facts)
        _check_since(since, run.revision)
        terminal = run.status in RUN_TERMINAL
        if work or not (run.revision > 0 or terminal):
            return None
        if run.retry_at is not None and run.retry_at <= utcnow():
            return None  # a retry is due: the locked tick submits it
        if since is None and not terminal and self.memo.states(run_id, run.revision) is None:
            return None
        view = await self._view(repository, run, since, remember=False)
        self._keep(token, run, facts, since, view)
        return view

    async def _busy(
        self, repository: RunRepository, principal: Principal, run_id: str, since: int | None
    ) -> RunView:
        """A tick that finds the run's lock held by another unit of work (a tick in another
        request or process, a chain worker) does not queue behind it holding a pooled
        connection: that unit is advancing the run, so this one answers the run as it stands,
        committed, and the caller's next tick sees what the other one did."""
        found = await repository.locked_run(run_id, lock=False)
        if found is None:
            raise NotFound(f"no workflow run {run_id!r}")
        run, facts = found
        await self._ensure_visible(repository.session, principal, run, facts)
        _check_since(since, run.revision)
        return await self._view(repository, run, since, remember=False)

    async def _plan(self, repository: RunRepository, run_id: str) -> tuple[dict[str, Any], Plan]:
        remembered = self.memo.plan(run_id)
        if remembered is None:
            snapshot = await repository.plan_snapshot(run_id)
            remembered = self.memo.remember_plan(run_id, snapshot, Plan.from_dict(snapshot))
        return remembered

    async def _view(
        self,
        repository: RunRepository,
        run: WorkflowRun,
        since: int | None,
        states: Mapping[str, NodeState] | None = None,
        snapshot: dict[str, Any] | None = None,
        *,
        remember: bool = True,
    ) -> RunView:
        """The run as a tick answers it: every node state and the plan, or with `since` only
        the node states changed after that revision (read in this unit of work, so a tick's
        own writes are in). Node states read here are remembered at the run's revision only
        under the run's lock (`remember`): without it, a tick may commit between the reads."""
        if since is not None:
            changed = await repository.states_since(run.id, since)
            return replace(run_view(run, changed, {}), since=since)
        if snapshot is None:
            remembered = self.memo.plan(run.id)
            snapshot = (
                remembered[0] if remembered is not None else await repository.plan_snapshot(run.id)
            )
        if states is None:
            states = self.memo.states(run.id, run.revision)
        if states is None:
            states = await repository.states(run.id)
            if remember and run.status not in RUN_TERMINAL:  # an ended run stays out
                self.memo.remember_states(run.id, run.revision, states)
        return run_view(run, states, snapshot)

    async def _node_jobs(
        self, repository: RunRepository, run: WorkflowRun, result: TickResult
    ) -> list[NodeJob]:
        # Every function version was resolved and frozen when the workflow version was saved.
        wanted = {j.function_version_id for j in result.jobs if j.function_version_id}
        owners = self.memo.owners(wanted)
        if owners is None:
            owners = await repository.function_owners(wanted)
            self.memo.remember_owners(owners)
        jobs = []
        for request in result.jobs:
            version_id = request.function_version_id
            assert version_id is not None
            function_id, package_id = owners[version_id]
            jobs.append(
                NodeJob(
                    job_id=request.job_id,
                    function_version_id=version_id,
                    function_id=function_id,
                    package_id=package_id,
                    user_id=run.user_id,
                    run_id=run.id,
                    node_key=request.node_key,
                    attempt=result.nodes[request.node_key].attempt,
                    resolved_inputs=request.inputs,
                    actor=CHAIN_ACTOR if request.chain_rest else RUN_ACTOR,
                )
            )
        return jobs

    async def running_jobs(
        self, session: AsyncSession, principal: Principal, run_id: str
    ) -> list[tuple[str, str]]:
        """(job id, status) of the jobs the run's running nodes wait on: what a long-poll
        tick waits for."""
        repository = RunRepository.from_session(session)
        found = await repository.locked_run(run_id, lock=False)
        if found is None:
            raise NotFound(f"no workflow run {run_id!r}")
        await self._ensure_visible(session, principal, *found)
        return await repository.running_jobs(run_id)

    async def node_rows(
        self, session: AsyncSession, run_ids: Sequence[str], *, values: bool = True
    ) -> list[NodeRow]:
        """Node states of runs the caller already read (GraphQL loaders); without `values`,
        their outputs and errors are left out (None)."""
        return await RunRepository.from_session(session).node_rows(run_ids, values=values)

    async def visible_summaries(
        self, session: AsyncSession, principal: Principal, run_ids: Sequence[str]
    ) -> dict[str, RunView]:
        """The runs among `run_ids` the caller may see, by id, without node states, plan and
        terminal outputs (GraphQL loaders: a job's run)."""
        rows = await RunListRepository.from_session(session).visible_summaries(principal, run_ids)
        return {row.id: row for row in rows}

    async def last_runs(
        self, session: AsyncSession, principal: Principal, workflow_ids: Sequence[str]
    ) -> dict[str, RunView]:
        """The caller's latest run (admins: anyone's) of each workflow among `workflow_ids`
        the caller already read, by workflow id, as summaries (GraphQL loaders)."""
        rows = await RunListRepository.from_session(session).last_runs(principal, workflow_ids)
        return {row.workflow_id: row for row in rows}

    async def plan_snapshots(
        self, session: AsyncSession, run_ids: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        """The frozen plans of runs the caller already read (GraphQL loaders): from the memo
        when remembered, else read (a 10,000-node plan is megabytes: only when asked for)."""
        found, missing = self.memo.plan_snapshots(run_ids)
        if missing:
            found.update(await RunRepository.from_session(session).plan_snapshots(missing))
        return found

    async def workflow_versions(
        self, session: AsyncSession, ids: Sequence[str]
    ) -> dict[str, WorkflowVersionView]:
        """The workflow versions of runs the caller already read (GraphQL loaders). Immutable
        and large (a 1,000-node graph), so remembered across requests."""
        found, missing = self.memo.workflow_versions(ids)
        if missing:
            loaded = await workflow_service.versions_by_id(session, missing)
            self.memo.remember_workflow_versions(loaded.values())
            found.update(loaded)
        return found

    async def _ensure_visible(
        self, session: AsyncSession, principal: Principal, run: WorkflowRun, facts: WorkflowFacts
    ) -> None:
        await access_service.require(
            session,
            principal,
            ("see_run", f"workflow run {run.id!r}"),
            on=facts,
            submitted_by=run.user_id,
        )


run_service = RunService()


def _adopted_outputs(
    frozen: Plan, result: TickResult, results: Mapping[str, JobResult]
) -> dict[str, str]:
    """The jobs whose outputs this tick's `result` copies into the run (their nodes became
    `success`), each with its function version."""
    found: dict[str, str] = {}
    for key, state in result.nodes.items():
        if state.status != "success" or state.job_id not in results:
            continue
        version = frozen.nodes[key].function_version_id
        if state.job_id is not None and version is not None:
            found[state.job_id] = version
    return found


def _refusals(lost: set[str], results: Mapping[str, JobResult]) -> dict[str, JobResult]:
    return {
        job_id: JobResult.failed(
            "permission_denied",
            "the run's owner may no longer execute the node's function: its package is not "
            "visible to them now; the job's outputs were not taken into the run",
            results[job_id].finished_at,
        )
        for job_id in lost
    }
