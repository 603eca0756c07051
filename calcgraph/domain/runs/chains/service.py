"""Chain execution, the job store's side: a worker runs a chain of the frozen plan node after
node, each node under its own job row, without a tick between links.

The planner makes every link of a chain the only consumer of its predecessor, and the
predecessor its only dependency: an interior node reads run inputs and its predecessor's
outputs, nothing else, so the worker can resolve its inputs (`following`: `tick.resolve_inputs`,
the tick's own rule) as soon as the predecessor succeeded, and run it before any commit.

- `start`: claim the message's job (`queued -> running`, guarded as `jobs.run` does). When the
  claim fails, the delivery resumes the chain where an earlier one left a job `queued` after an
  infrastructure failure, or finds nothing to do: a redelivered message never re-runs a
  recorded node.
- `record`: a batch of nodes the worker ran since its last commit, in one commit under the
  run's lock (the tick's). The first node's job is the running one: its result is recorded
  (`running -> ...`, guarded). On success, each later node gets its job written finished, with
  the times it ran and the attempt the tick would give it, and the node after the batch gets
  its job started: a tick sees them together and adopts them (`tick`'s `started`), the whole
  batch in one pass. A node is written only while the run still shows it `pending` (a failed
  run has cancelled it); the (run, node, attempt) key makes the tick and the worker start it at
  most once between them, and the chain stops at a node it finds taken. A result cache hit is
  a node born `success` (`cache_hit`) and the chain goes on from its outputs. A node whose
  inputs cannot be resolved is left to the tick, which records the same failure as in node
  execution. With `queued`, the next job is written `queued` (after an infrastructure failure,
  for the retry; with `send`, a hand-off: a new chain message for it leaves after the commit,
  so a long chain spans several messages, each within the actor's time limit).
- Access at every act (contract sections 3 and 8b): the run owner's right to execute the chain
  ahead, the claimed head included, is checked once per batch, in one statement, at `start` and
  in each `record` that starts a next batch. A refused node is never run nor answered from the
  cache: its job is written born `failed` (the head's recorded failed) with kind
  `permission_denied`, the tick adopts it and fails the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.service import access_service
from calcgraph.domain.events.service import record_job_rows, record_job_transitions
from calcgraph.domain.jobs.enqueue import enqueue_job
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.store.repository import Finish, JobStoreRepository
from calcgraph.domain.runs.bindings import InputResolutionError, resolve_inputs
from calcgraph.domain.runs.chains.repository import ChainRepository
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.store.repository import RunStore
from calcgraph.domain.workflows.planner import Plan

CHAIN_ACTOR = "chains.run"


@dataclass(frozen=True)
class ChainContext:
    """What every link of a chain needs of its run."""

    run_id: str
    user_id: str
    lease: str
    """The token of the delivery running the chain: its claim's, and every job it starts."""
    plan: Plan
    inputs: Mapping[str, Any]
    """The run's inputs in SI."""
    owners: Mapping[str, tuple[str, str]]
    """Function version id -> (function id, package id) of the chain's nodes."""
    refresh: bool = False
    """The run was created with `"cache": "refresh"`: no node is answered from the cache."""


@dataclass(frozen=True)
class ChainStep:
    """A node of the chain to run now: a claimed (or worker-started) job, or the next node of
    a batch, whose job row (under this id) is written when the batch is recorded."""

    job_id: str
    node_key: str
    function_version_id: str
    inputs: dict[str, Any]
    rest: tuple[str, ...]
    """The nodes of the chain after this one."""
    refused: frozenset[str] = frozenset()
    """Function versions of this step and `rest` the run's owner may not execute, as checked
    when this step's batch began (its job was claimed or started): the batch runs none of
    them."""


@dataclass(frozen=True)
class Link:
    """A node the worker ran (or found in the result cache) since the chain's last commit, with
    its times as they happened."""

    step: ChainStep
    outcome: Outcome
    started_at: datetime
    finished_at: datetime
    cache_hit: bool = False


@dataclass(frozen=True)
class Batch:
    """What one commit of a chain records: the links run since the last commit, then the job
    of `next_step` to start (`queued` instead of running; with `send`, in a new chain
    message), `started_at` when it already runs."""

    links: Sequence[Link]
    next_step: ChainStep | None = None
    queued: bool = False
    send: bool = False
    started_at: datetime | None = None


@dataclass(frozen=True)
class Advance:
    recorded: tuple[str, ...] = ()
    """The jobs of the links this caller recorded, in order: a prefix of the batch's links,
    empty when another delivery or the sweeper recorded the first."""
    next: ChainStep | None = None
    """The node whose job this commit started `running`, to run next."""


def _rest(plan: Plan, node_key: str) -> tuple[str, ...]:
    chain_id = plan.nodes[node_key].chain
    for chain in plan.chains:
        if chain.id == chain_id:
            return chain.node_keys[chain.node_keys.index(node_key) + 1 :]
    return ()


class ChainService:
    def __init__(self) -> None:
        # Plans are frozen at run creation and function version owners are immutable.
        self.memo = RunMemo()

    async def start(
        self, session: AsyncSession, job_id: str, lease: str
    ) -> tuple[ChainContext, ChainStep] | None:
        jobs = JobStoreRepository.from_session(session)
        repository = ChainRepository.from_session(session)
        place = await repository.place(job_id)
        if place is None:
            return None  # not a workflow node's job: never sent here
        run_id, node_key = place
        context = await self._context(session, run_id, lease)
        if context is None:
            return None
        rest = _rest(context.plan, node_key)
        claimed = await jobs.claim(job_id, utcnow(), lease)
        if claimed is None:
            resumed = await repository.first_queued(run_id, rest)
            if resumed is None:
                return None
            node_key, job_id = resumed
            rest = _rest(context.plan, node_key)
            claimed = await jobs.claim(job_id, utcnow(), lease)
            if claimed is None:
                return None
        await record_job_transitions(session, started=[job_id])
        # The head too: its job waited in the queue since the tick that submitted it.
        refused = await access_service.refused_executions(
            session, context.user_id, _versions(context.plan, (node_key, *rest))
        )
        step = ChainStep(
            job_id,
            node_key,
            claimed.function_version_id,
            dict(claimed.resolved_inputs),
            rest,
            refused,
        )
        return context, step

    async def _context(self, session: AsyncSession, run_id: str, lease: str) -> ChainContext | None:
        found = await ChainRepository.from_session(session).run(run_id)
        if found is None:
            return None
        user_id, inputs, refresh = found
        # Through the tick's read-through store: the plan and owners as the tick reads them.
        store = RunStore(session, self.memo)
        _, plan = await store.plan(run_id)
        versions = {n.function_version_id for n in plan.nodes.values() if n.function_version_id}
        owners = await store.owners(versions)
        return ChainContext(run_id, user_id, lease, plan, inputs, owners, refresh)

    def following(
        self, context: ChainContext, step: ChainStep, outputs: Mapping[str, Any]
    ) -> ChainStep | None:
        """The chain's node after `step`, once `step` succeeded with `outputs`, its inputs
        resolved by the tick's rule; None at the chain's end, or when its inputs cannot be
        resolved (left to the tick, which records the same failure as node execution)."""
        if not step.rest:
            return None
        key = step.rest[0]
        node = context.plan.nodes[key]
        if node.function_version_id is None:
            return None
        try:
            upstream = {step.node_key: NodeState("success", outputs=dict(outputs))}
            inputs = resolve_inputs(node, upstream, context.inputs)
        except InputResolutionError:
            return None
        return ChainStep(
            new_id(), key, node.function_version_id, inputs, step.rest[1:], step.refused
        )

    def refused(self, step: ChainStep, started_at: datetime | None = None) -> Link | None:
        """The link of a node the batch may not run (its function version was refused when the
        batch began): failed with kind `permission_denied`, never run; None when allowed."""
        if step.function_version_id not in step.refused:
            return None
        now = utcnow()
        error = {
            "kind": "permission_denied",
            "message": f"the run's owner may no longer execute function version "
            f"{step.function_version_id!r}: its package is not visible to them now",
        }
        return Link(step, Outcome("failed", None, error, ""), started_at or now, now)

    async def record(self, session: AsyncSession, context: ChainContext, batch: Batch) -> Advance:
        """Record a batch in one commit: finish the first link's job (the running one), add
        the later links' jobs born finished, and start the next step's job."""
        links, next_step, started_at = batch.links, batch.next_step, batch.started_at
        repository = ChainRepository.from_session(session)
        await repository.lock_run(context.run_id)
        head = links[0]
        finish = Finish(head.step.job_id, head.outcome, context.lease)
        if not await JobStoreRepository.from_session(session).finish(finish, head.finished_at):
            return Advance()
        await record_job_transitions(session, ended=[head.step.job_id])
        later = [*links[1:]]
        if head.outcome.status != "success" or (not later and next_step is None):
            return Advance((head.step.job_id,))
        keys = [link.step.node_key for link in later]
        keys += [next_step.node_key] if next_step is not None else []
        states = await repository.node_states(context.run_id, keys)
        rows: list[dict[str, Any]] = []
        for link in later:
            attempt = _next_attempt(states, link.step.node_key)
            if attempt is None:
                break  # cancelled by a failed run's tick
            rows.append(self._row(context, link.step, attempt, link))
        else:
            attempt = None if next_step is None else _next_attempt(states, next_step.node_key)
            if next_step is not None and attempt is not None:
                # The next batch begins here: the owner's right to execute its node and the
                # chain after it, checked now, once for the batch.
                versions = {next_step.function_version_id} | _versions(context.plan, next_step.rest)
                refused = await access_service.refused_executions(
                    session, context.user_id, versions
                )
                next_step = replace(next_step, refused=refused)
                denied = self.refused(next_step, started_at)
                if denied is not None:
                    # Born failed: the tick adopts it and fails the run; the chain ends.
                    rows.append(self._row(context, next_step, attempt, denied))
                    next_step = None
                else:
                    rows.append(
                        self._row(context, next_step, attempt, None, batch.queued, started_at)
                    )
        inserted = await repository.add_jobs(context.run_id, rows)
        await record_job_rows(session, [row for row in rows if row["id"] in inserted])
        # The run's lock makes the tick and the worker start a node at most once between them:
        # a row already there (the unique (run, node, attempt)) ends the chain at that node.
        done = [head.step.job_id]
        for link in later:
            if link.step.job_id not in inserted:
                return Advance(tuple(done))
            done.append(link.step.job_id)
        if next_step is None or next_step.job_id not in inserted:
            return Advance(tuple(done))
        if batch.queued:
            if batch.send:
                enqueue_job(CHAIN_ACTOR, next_step.job_id, 1)
            return Advance(tuple(done))
        return Advance(tuple(done), next_step)

    def _row(
        self,
        context: ChainContext,
        step: ChainStep,
        attempt: int,
        link: Link | None,
        queued: bool = False,
        started_at: datetime | None = None,
    ) -> dict[str, Any]:
        function_id, package_id = context.owners[step.function_version_id]
        row: dict[str, Any] = {
            "id": step.job_id,
            "function_id": function_id,
            "function_version_id": step.function_version_id,
            "package_id": package_id,
            "user_id": context.user_id,
            "inputs": step.inputs,
            "resolved_inputs": step.inputs,
            "workflow_run_id": context.run_id,
            "node_key": step.node_key,
            "attempt": attempt,
        }
        if link is None:
            running = not queued
            now = utcnow()
            row.update(
                status="running" if running else "queued",
                lease=context.lease if running else None,
                heartbeat_at=now if running else None,
                cache_hit=False,
                outputs=None,
                error=None,
                logs=None,
                deliveries=1,
                started_at=started_at or now if running else None,
                finished_at=None,
            )
        else:
            row.update(
                status=link.outcome.status,
                cache_hit=link.cache_hit,
                outputs=link.outcome.outputs,
                error=link.outcome.error,
                logs=link.outcome.logs,
                deliveries=0 if link.cache_hit else 1,
                lease=None,
                heartbeat_at=None,
                started_at=link.started_at,
                finished_at=link.finished_at,
            )
        return row


def _versions(plan: Plan, node_keys: Sequence[str]) -> set[str]:
    found = (plan.nodes[key].function_version_id for key in node_keys)
    return {version for version in found if version is not None}


def _next_attempt(states: Mapping[str, tuple[str, int]], node_key: str) -> int | None:
    """The attempt the tick would give a node it submitted now; None unless it is pending."""
    state = states.get(node_key)
    return None if state is None or state[0] != "pending" else state[1] + 1


chain_service = ChainService()
