"""`RunStore`: the run repository with the process's memo (`calcgraph.domain.runs.memo`)
behind it as a read-through cache, its maps looked up here (not through the memo); the tick
loads its `RunSnapshot` through it, and the chain service reads plans and owners through it.

What the memo may answer, and when a read may be remembered, is decided here only:
- the plan (frozen at creation) is remembered when the tick or a chain worker reads it, not
  when a reader does (`get`, an answer's view), which reads what it needs;
- node states are remembered at a revision only when read under the run's lock, or after a
  tick's commit (`written`): without the lock a tick may commit between two reads;
- function version owners (immutable) whenever read.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.runs import changes
from calcgraph.domain.runs.changes import Token
from calcgraph.domain.runs.memo import KeptAnswer, RunMemo
from calcgraph.domain.runs.repository import RunRepository, run_view
from calcgraph.domain.runs.snapshot import Lock, RunSnapshot
from calcgraph.domain.runs.state import RUN_TERMINAL
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
        in the same statement, whether a tick would find any (`RunSnapshot.work`). With what
        the memo remembers of the run: its plan, and its node states at the revision read."""
        snapshot = await self.repository.read(run_id, lock, work=work)
        if snapshot is None:
            return None
        if snapshot.started:
            changes.changed(run_id)  # its chain starts adopted: they are no longer work
        plan = self.memo.plans.get(run_id)
        if plan is not None:
            snapshot.plan_snapshot, snapshot.plan = plan
        states = self.memo.states.get(run_id)
        if states is not None and states[0] == snapshot.run.revision:
            snapshot.states = states[1]
        elif states is not None and states[0] == 0 and snapshot.locked:
            # Ticked elsewhere since its creation here: the hint that its first tick has
            # work (`RunMemo.expects_work`) is spent.
            self.memo.states.pop(run_id)
        return snapshot

    async def complete(self, snapshot: RunSnapshot) -> None:
        """The locked snapshot's plan and node states, read when the memo had none, and its
        terminal outputs when the row's read held them: what the tick decides from."""
        run = snapshot.run
        if run.terminal_outputs_held:
            outputs = await self.repository.terminal_outputs(run.id)
            snapshot.run = replace(run, terminal_outputs=outputs, terminal_outputs_held=False)
        if snapshot.plan is None:
            snapshot.plan_snapshot, snapshot.plan = await self.plan(run.id)
        if snapshot.states is None:
            snapshot.states = await self.repository.states(run.id)
            self.memo.states.put(run.id, (run.revision, snapshot.states))

    async def plan(self, run_id: str) -> tuple[dict[str, Any], Plan]:
        """The run's plan snapshot and plan, remembered once read."""
        remembered = self.memo.plans.get(run_id)
        if remembered is None:
            snapshot = await self.repository.plan_snapshot(run_id)
            remembered = (snapshot, Plan.from_dict(snapshot))
            self.memo.plans.put(run_id, remembered)
        return remembered

    async def owners(self, version_ids: set[str]) -> dict[str, tuple[str, str]]:
        """Function version id -> (function id, package id), remembered once read."""
        owners = self.memo.owners(version_ids)
        if owners is None:
            owners = await self.repository.function_owners(version_ids)
            self.memo.remember_owners(owners)
        return owners

    async def view(
        self,
        snapshot: RunSnapshot,
        since: int | None,
        *,
        remember: bool = True,
        keep: Token | None = None,
    ) -> RunView:
        """The run as a tick answers it: every node state (the snapshot's, else read: an
        ended run's with its big outputs held) and the plan, or with `since` only the node
        states changed after that revision (read in this unit of work, so a tick's own writes
        are in). Node states read here are remembered at
        the run's revision only under the run's lock (`remember`): without it, a tick may
        commit between the reads. `keep`: the answer of a tick that changed nothing, kept
        under the run's change token (`RunMemo.keep_answer`)."""
        run = snapshot.run
        if since is not None:
            changed = await self.repository.states_since(run.id, since)
            view = replace(run_view(run, changed, {}), since=since)
        else:
            plan_snapshot = snapshot.plan_snapshot
            if plan_snapshot is None:
                plan_snapshot = await self.repository.plan_snapshot(run.id)
            states = snapshot.states
            ended = run.status in RUN_TERMINAL
            if states is None:
                # An ended run's states are read for this answer only: outputs over 64 KiB,
                # which it never shows, stay in the database (`RunRepository.states`).
                states = await self.repository.states(run.id, held=ended)
                if remember and not ended:  # an ended run stays out
                    self.memo.states.put(run.id, (run.revision, states))
            view = run_view(run, states, plan_snapshot)
        if keep is not None:
            self.memo.keep_answer(run.id, _last_tick(snapshot, keep), since, view)
        return view

    def written(self, snapshot: RunSnapshot) -> None:
        """This unit of work wrote the run, its fields and node states now the snapshot's
        (`persist.apply`): its change token is renewed after the commit, the run's last tick
        here is this one (no answer kept, its token noted after the commit: `note_token`), and
        once the unit commits the memo remembers its node states at the new revision, or
        forgets the run that ended."""
        run_id, revision, states = snapshot.run.id, snapshot.run.revision, snapshot.states
        changes.changed(run_id)
        self.memo.answers.put(run_id, _last_tick(snapshot, None))
        if snapshot.run.status in RUN_TERMINAL:
            self.repository.after_commit(lambda: self.memo.forget(run_id))
        elif states is not None:
            self.repository.after_commit(lambda: self.memo.states.put(run_id, (revision, states)))


def _last_tick(snapshot: RunSnapshot, token: Token | None) -> KeptAnswer:
    """What a tick of `snapshot` leaves in the memo under `token`, its answers not yet in."""
    run, facts = snapshot.run, snapshot.facts
    return KeptAnswer(
        token,
        run.user_id,
        facts.owner_id,
        facts.organization_id,
        facts.visibility,
        run.retry_at,
        time.monotonic(),
    )
