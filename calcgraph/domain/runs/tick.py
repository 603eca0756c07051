"""The tick: one advance of a workflow run, as a pure function of plain data.

tick(plan, run, states, results, inputs, now) -> TickResult

Phases, as the specification's tick rules give them, computed here and committed by the
caller in one transaction:
1. reconcile: every running node whose job has a result becomes success (outputs written)
   or failed (error recorded). Results for jobs no running node waits on are ignored, so
   the caller may pass every finished job it knows of. A pending node whose job a chain
   worker already started (`started`: the worker ran its predecessor and went on) becomes
   running with that job first, once its dependencies succeeded; nodes are visited in
   topological order, so a whole chain the worker got through is reconciled in one tick.
2. submit: extract nodes whose source succeeded are evaluated in-process, in topological
   order, so an extract that reads an extract just evaluated is evaluated in the same tick;
   then every pending function node whose function and extract dependencies all succeeded
   gets its inputs resolved and a job: all independent ready branches in the same tick.
   With chain execution, the job of a node with successors in its chain carries them
   (`chain_rest`): its worker runs them next, each under its own job row.
3. finalise: failed if any node failed, completed if every node succeeded.

Decisions where the specification leaves room:
- The run becomes `failed` in the tick that sees the first failure, as the run transition
  table says ("finalise phase, a function node has failed"), and pollers may stop there.
  A failed run starts no new work: every pending node is cancelled (those downstream of the
  failure, as the specification requires, and independent pending ones too, since nothing
  will ever start them). Running nodes are not interrupted; later ticks on the failed run
  still reconcile them, so an independent branch's success is recorded when it arrives.
- An extract node that fails (a pick that matches nothing) or a function node whose inputs
  cannot be resolved (an upstream output port missing, e.g. from an empty filter) fails like
  a function node: it makes the run failed and can be `first_failed_node_key`. A failure
  known in a tick stops submission in that tick, so no job starts for a run about to fail.
- A node whose function version the run's owner may no longer execute (`refused`: access is
  decided at every act, contract section 3) fails the same way, with kind
  `permission_denied`, before any job exists for it.
- A tick may submit at most `room` jobs (the owner's queued-jobs quota, contract 8b): the ready
  nodes past it, in plan order, stay pending, deferred like a retry (`retry_at`, their next
  attempt) by `DEFER_SECONDS`, so the run's `retry_at` brings a later tick that submits them
  once jobs have started. The run neither fails nor exceeds the quota.
- `completed_at` is also set when the run fails: the specification keeps it null "until the
  run ends", and a failed run has ended.
- `first_failed_node_key` is recomputed from node states on every tick (earliest
  `finished_at`, ties by node key), so it is exact even when failures arrive out of order.

Cost: O(nodes + edges) per tick, using the adjacency frozen in the plan.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from calcgraph.domain.quotas.limits import JOBS_RETRY_SECONDS
from calcgraph.domain.runs.bindings import InputResolutionError, Refused, resolve_inputs
from calcgraph.domain.runs.state import (
    RUN_TERMINAL,
    JobRequest,
    JobResult,
    NodeState,
    RunState,
    StartedJob,
    TickResult,
    next_attempt,
    retried,
)
from calcgraph.domain.workflows.extract import filter_bundle, pick
from calcgraph.domain.workflows.planner import Plan, PlanNode

DEFER_SECONDS = JOBS_RETRY_SECONDS
"""A ready node past the tick's `room` waits this long for its next try."""


_PENDING = NodeState()
"""A node as created (frozen: one instance serves every missing node)."""


def _new_job_id(node_key: str) -> str:
    return str(uuid.uuid4())


class _Tick:
    def __init__(self, plan: Plan, states: Mapping[str, NodeState], now: datetime) -> None:
        self.plan = plan
        self.now = now
        # Working copy; nodes missing from `states` are taken as pending (as created).
        self.states: dict[str, NodeState] = {key: states.get(key, _PENDING) for key in plan.nodes}
        self.failed_now = False
        # Every state this tick wrote (a run of 1,000 nodes changes a few): only these, and
        # nodes missing from `states`, are compared to find what changed.
        self.touched: set[str] = set(plan.nodes.keys() - states.keys())

    def set(self, key: str, state: NodeState) -> None:
        self.states[key] = state
        self.touched.add(key)
        if state.status == "failed":
            self.failed_now = True

    def ready(self, node: PlanNode) -> bool:
        return self.states[node.node_key].status == "pending" and all(
            self.states[up].status == "success" for up in node.depends_on
        )

    def adopt(self, key: str, state: NodeState, job: StartedJob | None) -> NodeState:
        """The pending node's state once it takes the job a chain worker started for it."""
        node = self.plan.nodes[key]
        if job is None or not all(self.states[up].status == "success" for up in node.depends_on):
            return state
        if job.attempt <= state.attempt:
            # An attempt the node has been through: a start read before an earlier tick
            # adopted it (`locked_run_with_work`). Adopted once.
            return state
        adopted = replace(
            state,
            status="running",
            job_id=job.job_id,
            outputs=None,
            error=None,
            attempt=job.attempt,
            started_at=job.started_at or self.now,
            finished_at=None,
            retry_at=None,
        )
        self.set(key, adopted)
        return adopted

    def reconcile(
        self, results: Mapping[str, JobResult], started: Mapping[str, StartedJob]
    ) -> None:
        if not results and not started:
            return
        # Plan order is topological: a predecessor is reconciled before its successor is adopted.
        for key, state in list(self.states.items()):
            if state.status == "pending" and started:
                state = self.adopt(key, state, started.get(key))
            result = results.get(state.job_id or "") if state.status == "running" else None
            if result is None:
                continue
            finished = result.finished_at or self.now
            if result.status == "success":
                self.set(
                    key,
                    replace(
                        state,
                        status="success",
                        outputs=dict(result.outputs or {}),
                        error=None,
                        finished_at=finished,
                    ),
                )
            else:
                error = dict(result.error or {})
                error.setdefault("kind", "infrastructure_error")
                error.setdefault("message", "the job failed without an error message")
                policy = self.plan.nodes[key].retry
                if policy is not None and policy.retries(str(error["kind"]), state.attempt):
                    self.set(key, retried(state, error, finished + policy.delay(state.attempt)))
                    continue
                self.set(key, replace(state, status="failed", error=error, finished_at=finished))

    def evaluate_extracts(self) -> None:
        for node in self.plan.nodes.values():
            if node.kind != "extract" or not self.ready(node):
                continue
            assert node.from_node_key is not None
            assert node.pattern is not None
            state = self.states[node.node_key]
            started = replace(
                state, attempt=state.attempt + 1, started_at=self.now, finished_at=self.now
            )
            bundle = self.states[node.from_node_key].outputs or {}
            if node.mode == "filter":
                outputs = filter_bundle(bundle, node.pattern)
                self.set(node.node_key, replace(started, status="success", outputs=outputs))
                continue
            found, value = pick(bundle, node.pattern)
            if found:
                self.set(
                    node.node_key, replace(started, status="success", outputs={"value": value})
                )
            else:
                message = (
                    f"pattern {node.pattern!r} matches no key of the outputs of "
                    f"{node.from_node_key!r}"
                )
                error = {"kind": "extract_error", "message": message}
                self.set(node.node_key, replace(started, status="failed", error=error))

    def chain_rest(self) -> dict[str, tuple[str, ...]]:
        """Each function node's successors in its chain."""
        return {
            key: chain.node_keys[i + 1 :]
            for chain in self.plan.chains
            for i, key in enumerate(chain.node_keys)
        }

    def submit(
        self,
        inputs: Mapping[str, Any],
        new_job_id: Callable[[str], str],
        chains: bool,
        refused: Collection[str],
        room: int | None = None,
    ) -> list[JobRequest]:
        # `ready`, inlined without a generator per node: this scans every node of the run.
        states = self.states
        now = self.now
        ready: list[PlanNode] = []
        for n in self.plan.nodes.values():
            if n.kind != "function" or states[n.node_key].status != "pending":
                continue
            retry_at = states[n.node_key].retry_at
            if retry_at is not None and retry_at > now:
                continue  # its retry is not due yet
            for up in n.depends_on:
                if states[up].status != "success":
                    break
            else:
                ready.append(n)
        resolved: list[tuple[PlanNode, dict[str, Any]]] = []
        for node in ready:
            try:
                if refused and node.function_version_id in refused:
                    raise Refused(node)
                resolved.append((node, resolve_inputs(node, self.states, inputs)))
            except (InputResolutionError, Refused) as exc:
                state = self.states[node.node_key]
                kind = "permission_denied" if isinstance(exc, Refused) else "input_error"
                error = {"kind": kind, "message": str(exc)}
                self.set(
                    node.node_key,
                    replace(
                        state,
                        status="failed",
                        error=error,
                        attempt=next_attempt(state),
                        started_at=self.now,
                        finished_at=self.now,
                        retry_at=None,
                    ),
                )
        if self.failed_now:
            return []
        if room is not None and len(resolved) > room:
            resolved, deferred = resolved[: max(room, 0)], resolved[max(room, 0) :]
            later = now + timedelta(seconds=DEFER_SECONDS)
            for node, _ in deferred:
                state = self.states[node.node_key]
                self.set(
                    node.node_key,
                    replace(state, attempt=next_attempt(state), retry_at=later),
                )
        jobs: list[JobRequest] = []
        rest = self.chain_rest() if chains and resolved else {}
        for node, arguments in resolved:
            assert node.function is not None
            state = self.states[node.node_key]
            job_id = new_job_id(node.node_key)
            # Every field given: a new state, not `replace` (which inspects the fields each
            # call, a third of this loop's cost for a tick that submits 1,000 nodes).
            self.set(
                node.node_key,
                NodeState(
                    status="running",
                    job_id=job_id,
                    outputs=None,
                    error=None,
                    attempt=next_attempt(state),
                    started_at=self.now,
                    finished_at=None,
                    retry_at=None,
                    attempts=state.attempts,
                ),
            )
            jobs.append(
                JobRequest(
                    node.node_key,
                    job_id,
                    node.function,
                    node.function_version_id,
                    node.chain,
                    arguments,
                    rest.get(node.node_key, ()),
                )
            )
        return jobs

    def cancel_pending(self, *, running: bool = False) -> None:
        """Every pending node cancelled (and every running one with `running`)."""
        doomed = ("pending", "running") if running else ("pending",)
        for key, state in list(self.states.items()):
            if state.status in doomed:
                self.set(
                    key, replace(state, status="cancelled", finished_at=self.now, retry_at=None)
                )

    def finalise(self, run: RunState, submitted: bool) -> RunState:
        if run.status == "cancelled":
            return run
        failures = [
            (s.finished_at or self.now, k) for k, s in self.states.items() if s.status == "failed"
        ]
        if failures:
            self.cancel_pending()
            _, first = min(failures)
            error = self.states[first].error or {}
            message = f"node {first!r} failed: {error.get('kind')}: {error.get('message')}"
            return RunState("failed", run.completed_at or self.now, None, message, first)
        if all(s.status == "success" for s in self.states.values()):
            outputs = {key: dict(self.states[key].outputs or {}) for key in self.plan.terminal}
            return RunState("completed", run.completed_at or self.now, outputs, None, None)
        started = submitted or any(s.status != "pending" for s in self.states.values())
        waits = [s.retry_at for s in self.states.values() if s.retry_at is not None]
        return replace(
            run,
            status="running" if started or run.status == "running" else "pending",
            retry_at=min(waits, default=None),
        )


def tick(
    plan: Plan,
    run: RunState,
    states: Mapping[str, NodeState],
    results: Mapping[str, JobResult],
    inputs: Mapping[str, Any],
    now: datetime,
    new_job_id: Callable[[str], str] = _new_job_id,
    started: Mapping[str, StartedJob] | None = None,
    chains: bool = False,
    refused: Collection[str] = frozenset(),
    cancel: bool = False,
    room: int | None = None,
) -> TickResult:
    """Advance a run once.

    `states` holds every function and extract node; `results` maps job ids to the results of
    finished jobs; `inputs` are the run's resolved inputs (quantities already in SI);
    `new_job_id` names the job of a node being submitted (the caller's id scheme); `started`
    maps pending nodes to the jobs chain workers started for them (their results, if any, are
    in `results`); `chains` asks for chain execution of the jobs submitted; `refused` holds
    the function versions the run's owner may not execute now: a node about to be submitted
    on one fails with kind `permission_denied` instead (the caller checks the versions of a
    first pass's `jobs` and, when any is refused, ticks again with them). `cancel`: the run's
    owner cancelled it (contract section 10): nothing is reconciled, every pending and running
    node becomes `cancelled` and so does the run (its running jobs are the caller's to stop); a
    job that finished meanwhile keeps its outputs on the job, its node stays cancelled.
    `room`: the most jobs this tick may submit (None: no bound); the ready nodes past it stay
    pending, deferred by DEFER_SECONDS.
    """
    work = _Tick(plan, states, now)
    if cancel and run.status not in RUN_TERMINAL:
        work.cancel_pending(running=True)
        cancelled = RunState("cancelled", now, None, run.error_message, run.first_failed_node_key)
        return _result(work, states, (), cancelled, run)
    work.reconcile(results, started or {})
    jobs: list[JobRequest] = []
    if run.status not in RUN_TERMINAL and not _any_failed(work):
        work.evaluate_extracts()
        if not work.failed_now:
            jobs = work.submit(inputs, new_job_id, chains, refused, room)
    new_run = work.finalise(run, bool(jobs))
    return _result(work, states, tuple(jobs), new_run, run)


def _result(
    work: _Tick,
    states: Mapping[str, NodeState],
    jobs: tuple[JobRequest, ...],
    new_run: RunState,
    run: RunState,
) -> TickResult:
    touched = work.touched
    changed = {
        key: state
        for key, state in work.states.items()
        if key in touched and (key not in states or states[key] != state)
    }
    return TickResult(changed, jobs, new_run, new_run != run)


def _any_failed(work: _Tick) -> bool:
    return any(s.status == "failed" for s in work.states.values())
