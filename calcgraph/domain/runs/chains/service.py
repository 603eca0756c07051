"""Chain execution, the job store's side: a worker runs a chain of the frozen plan node after
node, each node under its own job row, without a tick between links.

The planner makes every link of a chain the only consumer of its predecessor, and the
predecessor its only dependency: an interior node reads run inputs and its predecessor's
outputs, nothing else, so the worker can resolve its inputs (`tick.resolve_inputs`, the
tick's own rule) as soon as the predecessor succeeded.

- `start`: claim the message's job (`queued -> running`, guarded as `jobs.run` does). When the
  claim fails, the delivery resumes the chain where an earlier one released a job after an
  infrastructure failure, or finds nothing to do: a redelivered message never re-runs a
  finished node.
- `advance`: under the run's lock (the tick's), record the node's result (`running -> ...`,
  guarded) and, on success, start the next node's job in the same commit: a tick sees the
  finished job and its successor's started job together and adopts the latter (`tick`'s
  `started`). The next node is started only while the run still shows it `pending` (a failed
  run has cancelled it), with the attempt the tick would give it; the (run, node, attempt)
  key makes the tick and the worker start it at most once between them. A result cache hit
  makes the next job born `success` and the chain goes on from its outputs. A node whose
  inputs cannot be resolved is left to the tick, which records the same failure as in node
  execution. With `hand_off`, the next job is written `queued` and a new chain message for it
  leaves after the commit: a long chain spans several messages, each within the actor's time
  limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.jobs.cache_key import CachedResult, result_key
from calcgraph.domain.jobs.enqueue import enqueue
from calcgraph.domain.jobs.execution.repository import JobExecutionRepository
from calcgraph.domain.runs.chains.repository import ChainRepository
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.tick import InputResolutionError, resolve_inputs
from calcgraph.domain.workflows.planner import Plan

CHAIN_ACTOR = "chains.run"


@dataclass(frozen=True)
class ChainContext:
    """What every link of a chain needs of its run."""

    run_id: str
    user_id: str
    plan: Plan
    inputs: Mapping[str, Any]
    """The run's inputs in SI."""
    owners: Mapping[str, tuple[str, str]]
    """Function version id -> (function id, package id) of the chain's nodes."""


@dataclass(frozen=True)
class ChainStep:
    """A claimed (or worker-started) node job to run now."""

    job_id: str
    node_key: str
    function_version_id: str
    inputs: dict[str, Any]
    rest: tuple[str, ...]
    """The nodes of the chain after this one."""


@dataclass(frozen=True)
class Advance:
    recorded: bool
    """This caller recorded the step's result (false: another delivery or the sweeper did)."""
    next: ChainStep | None = None
    cached: tuple[str, ...] = ()
    """Jobs born `success` from the result cache in the same commit (to notify)."""


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
        self, session: AsyncSession, job_id: str
    ) -> tuple[ChainContext, ChainStep] | None:
        jobs = JobExecutionRepository.from_session(session)
        repository = ChainRepository.from_session(session)
        place = await repository.place(job_id)
        if place is None:
            return None  # not a workflow node's job: never sent here
        run_id, node_key = place
        context = await self._context(session, run_id)
        if context is None:
            return None
        rest = _rest(context.plan, node_key)
        claimed = await jobs.claim(job_id, utcnow())
        if claimed is None:
            resumed = await repository.first_queued(run_id, rest)
            if resumed is None:
                return None
            node_key, job_id = resumed
            rest = _rest(context.plan, node_key)
            claimed = await jobs.claim(job_id, utcnow())
            if claimed is None:
                return None
        step = ChainStep(
            job_id, node_key, claimed.function_version_id, dict(claimed.resolved_inputs), rest
        )
        return context, step

    async def _context(self, session: AsyncSession, run_id: str) -> ChainContext | None:
        found = await ChainRepository.from_session(session).run(run_id)
        if found is None:
            return None
        user_id, inputs, snapshot = found
        remembered = self.memo.plan(run_id)
        if remembered is None:
            remembered = self.memo.remember_plan(run_id, snapshot, Plan.from_dict(snapshot))
        plan = remembered[1]
        versions = {n.function_version_id for n in plan.nodes.values() if n.function_version_id}
        owners = self.memo.owners(versions)
        if owners is None:
            owners = await RunRepository.from_session(session).function_owners(versions)
            self.memo.remember_owners(owners)
        return ChainContext(run_id, user_id, plan, inputs, owners)

    async def advance(
        self,
        session: AsyncSession,
        context: ChainContext,
        step: ChainStep,
        status: str,
        outputs: dict[str, Any] | None,
        error: dict[str, Any] | None,
        logs: str,
        lookup: Callable[[str], CachedResult | None],
        hand_off: bool = False,
    ) -> Advance:
        """Record `step`'s result and start the next node of the chain, in one commit."""
        repository = ChainRepository.from_session(session)
        await repository.lock_run(context.run_id)
        recorded = await JobExecutionRepository.from_session(session).finish(
            step.job_id, status, outputs, error, logs, utcnow()
        )
        if not recorded or status != "success" or not step.rest:
            return Advance(recorded)
        previous, produced = step.node_key, outputs or {}
        cached: list[str] = []
        for index, key in enumerate(step.rest):
            node = context.plan.nodes[key]
            state = await repository.node_state(context.run_id, key)
            if state is None or state[0] != "pending" or node.function_version_id is None:
                break  # cancelled by a failed run's tick, or taken over by a tick
            try:
                upstream = {previous: NodeState("success", outputs=produced)}
                inputs = resolve_inputs(node, upstream, context.inputs)
            except InputResolutionError:
                break
            version = node.function_version_id
            hit = lookup(result_key(version, inputs))
            queued = hand_off and hit is None
            now = utcnow()
            job_id = new_id()
            function_id, package_id = context.owners[version]
            row: dict[str, Any] = {
                "id": job_id,
                "function_id": function_id,
                "function_version_id": version,
                "package_id": package_id,
                "user_id": context.user_id,
                "inputs": inputs,
                "resolved_inputs": inputs,
                "workflow_run_id": context.run_id,
                "node_key": key,
                "attempt": state[1] + 1,
                "status": "queued" if queued else "running" if hit is None else "success",
                "cache_hit": hit is not None,
                "outputs": None if hit is None else hit.outputs,
                "logs": None if hit is None else hit.logs,
                "deliveries": 1 if hit is None else 0,
                "started_at": None if queued else now,
                "finished_at": None if hit is None else now,
            }
            if not await repository.add_job(row):
                break
            if queued:
                enqueue(CHAIN_ACTOR, job_id=job_id)
                return Advance(True, None, tuple(cached))
            if hit is None:
                return Advance(
                    True,
                    ChainStep(job_id, key, version, inputs, step.rest[index + 1 :]),
                    tuple(cached),
                )
            cached.append(job_id)
            previous, produced = key, hit.outputs
        return Advance(True, None, tuple(cached))


chain_service = ChainService()
