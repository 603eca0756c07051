"""Plain data the tick reads and writes: node states, job results, run fields, job requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Literal

from calcgraph.domain.workflows.planner import Plan

NodeStatus = Literal["pending", "running", "success", "failed", "cancelled"]
RunStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
RUN_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class NodeState:
    """One row of node_states (contract section 5 adds error, started_at, finished_at, attempt)."""

    status: NodeStatus = "pending"
    job_id: str | None = None
    """Kept after the job ends, so a finished node still leads to its job and logs."""
    outputs: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    """`{"kind", "message"}` on failure."""
    attempt: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    retry_at: datetime | None = None
    """Set on a pending node whose failed attempt its retry policy retries: the first tick at
    or after it submits attempt `attempt` (contract section 10)."""
    attempts: tuple[Mapping[str, Any], ...] = ()
    """Earlier attempts that failed and were retried: `{"attempt", "job_id", "error"}`."""
    reused: bool = False
    """A re-run's node that took a succeeded node of the original run (no job submitted)."""


NODE_STATE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(NodeState))
"""The columns of a node_states row that hold its state (the rest say which node it is)."""


PENDING = NodeState()
"""A node no tick has moved yet (frozen, so every such node of every run can be this one)."""


def initial_states(plan: Plan) -> dict[str, NodeState]:
    """Run creation: every function and extract node pending, no job submitted (one object for
    them all: a 12,000-node run's start would otherwise add 12,000 to the collector's heap)."""
    return dict.fromkeys(plan.nodes, PENDING)


def next_attempt(state: NodeState) -> int:
    """The attempt a node's next job is: the one its retry set, else one more than it made."""
    return state.attempt if state.retry_at is not None else state.attempt + 1


def retried(state: NodeState, error: Mapping[str, Any], retry_at: datetime) -> NodeState:
    """A node whose attempt failed with a kind its policy retries: pending again, on its next
    attempt, due at `retry_at`; the failed attempt joins `attempts`."""
    earlier = {"attempt": state.attempt, "job_id": state.job_id, "error": dict(error)}
    return replace(
        state,
        status="pending",
        job_id=None,
        outputs=None,
        error=None,
        attempt=state.attempt + 1,
        started_at=None,
        finished_at=None,
        retry_at=retry_at,
        attempts=(*state.attempts, earlier),
    )


@dataclass(frozen=True)
class JobResult:
    """The outcome of a finished worker job, as the job store reports it."""

    status: Literal["success", "failed"]
    outputs: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    finished_at: datetime | None = None
    """When the job ended; the tick's `now` when unknown. Orders failures for first_failed."""

    @staticmethod
    def success(outputs: Mapping[str, Any], finished_at: datetime | None = None) -> JobResult:
        return JobResult("success", outputs=outputs, finished_at=finished_at)

    @staticmethod
    def failed(kind: str, message: str, finished_at: datetime | None = None) -> JobResult:
        return JobResult(
            "failed", error={"kind": kind, "message": message}, finished_at=finished_at
        )


@dataclass(frozen=True)
class StartedJob:
    """A job a chain worker started for a node the run still shows pending: the worker ran
    the node's predecessor in the same chain and went on with it (`calcgraph.workers.chains`).
    The tick adopts it as the node's job, as if it had submitted it."""

    job_id: str
    attempt: int
    started_at: datetime | None = None


@dataclass(frozen=True)
class RunState:
    """The run-level fields a tick may change."""

    status: RunStatus = "pending"
    completed_at: datetime | None = None
    """Set when the run ends, completed or failed."""
    terminal_outputs: Mapping[str, Any] | None = None
    error_message: str | None = None
    first_failed_node_key: str | None = None
    retry_at: datetime | None = None
    """The earliest `retry_at` of the run's nodes: a tick before it has nothing to submit."""


@dataclass(frozen=True)
class JobRequest:
    """A job the caller must create and enqueue (after the tick's commit)."""

    node_key: str
    job_id: str
    """Already recorded on the node: the caller creates the job row with this id."""
    function: str
    function_version_id: str | None
    chain: str | None
    inputs: dict[str, Any]
    chain_rest: tuple[str, ...] = ()
    """The nodes of the chain after this one, which the job's worker runs next, in order (chain
    execution); empty: the job runs this node only."""


@dataclass(frozen=True)
class TickResult:
    nodes: dict[str, NodeState]
    """Only the nodes whose state changed: the caller writes exactly these rows."""
    jobs: tuple[JobRequest, ...]
    run: RunState
    run_changed: bool

    @property
    def changed(self) -> bool:
        """False means the tick was a no-op: nothing to write, the revision stays."""
        return bool(self.nodes) or bool(self.jobs) or self.run_changed
