"""Workflow runs: create (`create`), read, list, and the tick.

The tick is one unit of work and one pipeline, its path picked in one place (`RunService.answer`):
load (`snapshot`: lock the run row, read the results of the jobs running nodes wait on and
the chain starts, then the plan and every node state, through the memo), decide (the pure
`tick`), authorize (`decide`: the owner's queued-jobs room and right to execute), persist
(`persist.apply`: only the changed node rows and the run fields, bumping `revision`, and the
submitted jobs through the execution path, whose messages leave after the commit).
Of concurrent ticks of one run (in one process or several), one takes the lock and advances
the run; the others do not wait for it holding a pooled connection (SKIP LOCKED) but answer
the run as committed, so none submits anything twice; the jobs' unique (run, node, attempt)
key backs that up. A chain worker takes the same lock, and a tick meeting it answers the
same way.

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
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import Conflict, FieldError, NotFound, ValidationError, found
from calcgraph.domain.jobs.cache_key import ResultLookup
from calcgraph.domain.listing.filters import TimeRange, parse_statuses
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.runs.authorize.service import authorize
from calcgraph.domain.runs.changes import Token
from calcgraph.domain.runs.create.service import (
    Reuse,
    RunOrder,
    create_run,
    resolve_run_inputs,
    start_run,
)
from calcgraph.domain.runs.listing.repository import RunListRepository
from calcgraph.domain.runs.loaders import RunLoads
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.persist.service import apply
from calcgraph.domain.runs.repository import RunRepository, run_view
from calcgraph.domain.runs.snapshot import Lock, WorkflowFacts
from calcgraph.domain.runs.state import RUN_TERMINAL
from calcgraph.domain.runs.store.repository import RunStore
from calcgraph.domain.runs.views import RunRow, RunView
from calcgraph.domain.workflows.service import workflow_service

__all__ = ["RUN_STATUSES", "Reuse", "RunOrder", "RunService", "resolve_run_inputs", "run_service"]

RUN_STATUSES = ("pending", "running", "completed", "failed", "cancelled")


def _check_since(since: int | None, revision: int) -> None:
    if since is not None and not 0 <= since <= revision:
        raise ValidationError(
            f"since must be a revision of this run, from 0 to {revision}",
            [FieldError(("query", "since"), f"expected an integer from 0 to {revision}")],
        )


DEFAULT_QUOTAS = Quotas()


@dataclass(frozen=True)
class Advance:
    """What a tick that may advance the run was asked (see `RunService.tick`)."""

    cache: ResultLookup
    chains: bool = False
    cancel: bool = False
    quotas: Quotas = DEFAULT_QUOTAS


class RunService(RunLoads):
    def __init__(self) -> None:
        self.memo = RunMemo()

    async def create(
        self,
        database: Database,
        principal: Principal,
        slug: str,
        inputs: object,
        *,
        refresh: bool = False,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> RunView:
        """A run of the workflow's latest version (`create_run`)."""
        return await create_run(
            database, self.memo, principal, slug, inputs, refresh=refresh, quotas=quotas
        )

    async def start(
        self,
        session: AsyncSession,
        principal: Principal,
        order: RunOrder,
        *,
        reuse: Reuse | None = None,
    ) -> RunView:
        """Create the run `order` asks for (a re-run): `create.start_run`."""
        return await start_run(session, self.memo, principal, order, reuse=reuse)

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
        store = RunStore(session, self.memo)
        read = found(await store.read(run_id, "none"), f"workflow run {run_id!r}")
        run = read.run
        await self._ensure_visible(session, principal, run, read.facts)
        snapshot = read.plan_snapshot if plan else {}
        if snapshot is None:
            snapshot = await store.repository.plan_snapshot(run_id)
        # States remembered at this revision are committed ones; states read here are not
        # remembered: without the run's lock a tick may commit between the two reads.
        node_states = read.states
        if node_states is None and states:
            node_states = await store.repository.states(run_id, held=True)
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
        statuses = parse_statuses(statuses, RUN_STATUSES, "run status")
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
        advance = Advance(cache, chains, cancel, quotas)
        view = await self.answer(
            session, principal, run_id, since=since, token=token, advance=advance
        )
        assert view is not None  # a tick always answers
        return view

    def kept(
        self, principal: Principal, run_id: str, token: Token, since: int | None
    ) -> RunView | None:
        """The run as a tick would answer it, without the database: what a tick that changed
        nothing answered under the run's current change `token` (no unit of work changed the
        run since), when the caller may see the run on the facts kept with it without a read
        (their role in an organization does not count), and no retry is due. None otherwise:
        the caller's tick reads the database, and refuses there what it refuses."""
        kept = self.memo.answers.get(run_id)
        if kept is None or not kept.current(token, time.monotonic()):
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

    async def answer(
        self,
        session: AsyncSession,
        principal: Principal,
        run_id: str,
        *,
        since: int | None = None,
        token: Token | None = None,
        advance: Advance | None = None,
    ) -> RunView | None:
        """The one place a tick's path is picked. Without `advance`: the run as a tick would
        answer it, when that tick would change nothing (see `tick`), read without the run's
        lock or a write transaction (one statement, plus the changed states with `since`);
        None when the tick has work, or when it would read node states this process does not
        remember (the locked tick remembers them for the next one). With `advance`: the tick
        (`tick`), under the run's lock. Either way: load the run, decide the caller's access
        to it once, then answer it unchanged, answer it busy (another unit of work holds its
        lock), or advance it: load its plan and states, decide, authorize, persist. An answer
        that changes nothing is kept under `token` (`kept`)."""
        lock: Lock = "none" if advance is None else "wait" if advance.cancel else "skip"
        store = RunStore(session, self.memo)
        snapshot = await store.read(run_id, lock, work=advance is None)
        busy = snapshot is None and lock == "skip"
        if busy:
            # Its lock is held by another unit of work (a tick in another request or process,
            # a chain worker), which is advancing the run: rather than queue behind it holding
            # a pooled connection, answer the run as it stands, committed; the caller's next
            # tick sees what the other one did.
            snapshot = await store.read(run_id, "none")
        if snapshot is None:
            raise NotFound(f"no workflow run {run_id!r}")
        run = snapshot.run
        await self._ensure_visible(session, principal, run, snapshot.facts)
        if advance is not None and advance.cancel and run.status in RUN_TERMINAL:
            raise Conflict(
                f"workflow run {run_id!r} is {run.status} already: it cannot be cancelled"
            )
        _check_since(since, run.revision)
        now = utcnow()
        due = run.retry_at is not None and run.retry_at <= now
        # Whether node states read for the answer may be remembered (only under the run's
        # lock), whether the answer is kept (only when this unit of work changed nothing, and
        # read the run's work). The snapshot's states are those remembered, or loaded to
        # advance it, or written by its tick; None: the answer reads them.
        remember = keep = not busy
        if busy:
            pass  # answered as it stands, committed: the other unit of work advances it
        elif advance is None:
            if snapshot.work or not snapshot.ticked or due:
                return None  # the locked tick reconciles, submits, or submits the retry due
            if since is None and run.status not in RUN_TERMINAL and snapshot.states is None:
                return None
            remember = False
        elif snapshot.results or snapshot.started or due or advance.cancel or not snapshot.ticked:
            await store.complete(snapshot)
            result = await authorize(
                session, snapshot, now, advance.quotas, chains=advance.chains, cancel=advance.cancel
            )
            if result.changed:
                await apply(session, store, snapshot, result, advance.cache)
                keep = False
        return await store.view(snapshot, since, remember=remember, keep=token if keep else None)

    async def running_jobs(
        self, session: AsyncSession, principal: Principal, run_id: str
    ) -> list[tuple[str, str]]:
        """(job id, status) of the jobs the run's running nodes wait on: what a long-poll
        tick waits for."""
        repository = RunRepository.from_session(session)
        read = found(await repository.read(run_id), f"workflow run {run_id!r}")
        await self._ensure_visible(session, principal, read.run, read.facts)
        return await repository.running_jobs(run_id)

    async def _ensure_visible(
        self, session: AsyncSession, principal: Principal, run: RunRow, facts: WorkflowFacts
    ) -> None:
        await access_service.require(
            session,
            principal,
            ("see_run", f"workflow run {run.id!r}"),
            on=facts,
            submitted_by=run.user_id,
        )


run_service = RunService()
