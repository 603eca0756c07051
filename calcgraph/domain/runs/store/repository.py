"""`RunStore`: the run repository with the process's memo (`calcgraph.domain.runs.memo`)
behind it as a read-through cache; the tick loads its `RunSnapshot` through it, and the chain
service reads plans and owners through it.

What the memo may answer, and when a read may be remembered, is decided here only:
- the plan (frozen at creation) is remembered when the tick or a chain worker reads it, not
  when a reader does (`get`, an answer's view), which reads what it needs;
- node states are remembered at a revision only when read under the run's lock, or after a
  tick's commit (`persist`): without the lock a tick may commit between two reads;
- function version owners (immutable) whenever read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.runs import changes
from calcgraph.domain.runs.changes import Token
from calcgraph.domain.runs.memo import KeptAnswer, RunMemo
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.repository import RunRepository, run_view
from calcgraph.domain.runs.snapshot import Lock, RunSnapshot
from calcgraph.domain.runs.state import RUN_TERMINAL, NodeState
from calcgraph.domain.runs.views import RunView
from calcgraph.domain.workflows.planner import Plan


class RunStore:
    """The run repository with the memo behind it: every read of a tick goes through here."""

    def __init__(self, session: AsyncSession, memo: RunMemo) -> None:
        self.session = session
        self.repository = RunRepository.from_session(session)
        self.memo = memo

    async def read(self, run_id: str, lock: Lock, *, work: bool = False) -> RunSnapshot | None:
        """The run row with its access facts (None: no such run, or with `skip` its lock is
        held elsewhere). Locked, in the same statement, what the tick reconciles: the finished
        results and the chain starts, which this unit of work adopts. Unlocked with `work`,
        in the same statement, whether a tick would find any (`RunSnapshot.work`)."""
        if lock != "none":
            locked = await self.repository.locked_run_with_work(run_id, skip_locked=lock == "skip")
            if locked is None:
                return None
            run, facts, results, started = locked
            if run.revision > 0 and self.memo.revision(run_id) == 0:
                self.memo.forget_states(run_id)  # ticked elsewhere: `unchanged` reads it again
            if started:
                changes.changed(run_id)  # its chain starts adopted: they are no longer work
            return RunSnapshot(run, facts, locked=True, results=results, started=started)
        if work:
            found = await self.repository.run_with_work(run_id)
            if found is None:
                return None
            return RunSnapshot(found[0], found[1], locked=False, work=found[2])
        row = await self.repository.run_with_facts(run_id)
        return None if row is None else RunSnapshot(*row, locked=False)

    async def complete(self, snapshot: RunSnapshot) -> None:
        """The locked snapshot's plan and node states, from the memo when remembered."""
        run = snapshot.run
        snapshot.plan_snapshot, snapshot.plan = await self.plan(run.id)
        states = self.memo.states(run.id, run.revision)
        if states is None:
            states = await self.repository.states(run.id)
            self.memo.remember_states(run.id, run.revision, states)
        snapshot.states = states

    async def plan(self, run_id: str) -> tuple[dict[str, Any], Plan]:
        """The run's plan snapshot and plan, remembered once read."""
        remembered = self.memo.plan(run_id)
        if remembered is None:
            snapshot = await self.repository.plan_snapshot(run_id)
            remembered = self.memo.remember_plan(run_id, snapshot, Plan.from_dict(snapshot))
        return remembered

    async def plan_snapshot(self, run_id: str) -> dict[str, Any]:
        """The run's plan snapshot, from the memo or read (not remembered: a reader's)."""
        remembered = self.memo.plan(run_id)
        return (
            remembered[0] if remembered is not None else await self.repository.plan_snapshot(run_id)
        )

    def remembered_states(self, run: WorkflowRun) -> Mapping[str, NodeState] | None:
        return self.memo.states(run.id, run.revision)

    async def owners(self, version_ids: set[str]) -> dict[str, tuple[str, str]]:
        """Function version id -> (function id, package id), remembered once read."""
        owners = self.memo.owners(version_ids)
        if owners is None:
            owners = await self.repository.function_owners(version_ids)
            self.memo.remember_owners(owners)
        return owners

    async def view(
        self,
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
            changed = await self.repository.states_since(run.id, since)
            return replace(run_view(run, changed, {}), since=since)
        if snapshot is None:
            snapshot = await self.plan_snapshot(run.id)
        if states is None:
            states = self.memo.states(run.id, run.revision)
        if states is None:
            states = await self.repository.states(run.id)
            if remember and run.status not in RUN_TERMINAL:  # an ended run stays out
                self.memo.remember_states(run.id, run.revision, states)
        return run_view(run, states, snapshot)

    def keep(
        self, token: Token | None, snapshot: RunSnapshot, since: int | None, view: RunView
    ) -> None:
        """Keep the answer of a tick that changed nothing under the run's change `token`."""
        if token is None:
            return
        run, facts = snapshot.run, snapshot.facts
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

    def changed(self, run_id: str) -> None:
        """This unit of work changes the run: its change token is renewed after the commit,
        and the answer kept for it is known to be changed by this process."""
        changes.changed(run_id)
        self.memo.changed_here(run_id)

    def forget_on_commit(self, run_id: str) -> None:
        self.repository.after_commit(lambda: self.memo.forget(run_id))

    def remember_on_commit(
        self, run_id: str, revision: int, states: Mapping[str, NodeState]
    ) -> None:
        self.repository.after_commit(lambda: self.memo.remember_states(run_id, revision, states))
