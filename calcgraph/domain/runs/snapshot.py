"""Load, the tick's first step, gives one `RunSnapshot` of a run: its row, its workflow's
access facts, the work a tick reconciles, its plan and node states (read through
`store.repository.RunStore`, the run repository with the process's memo behind it). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from calcgraph.domain.read_models import from_attributes
from calcgraph.domain.runs.state import RUN_TERMINAL, JobResult, NodeState, RunState, StartedJob
from calcgraph.domain.runs.views import RunRow
from calcgraph.domain.workflows.planner import Plan

Lock = Literal["none", "skip", "wait"]
"""How a unit of work reads the run row: unlocked (an answer that changes nothing), locked
unless another unit of work holds the lock (`skip`: a tick), or locked, waiting for it
(`wait`: the tick that cancels)."""


@dataclass(frozen=True)
class WorkflowFacts:
    """What the access policy needs of a run's workflow."""

    owner_id: str
    organization_id: str | None
    visibility: str
    slug: str = ""
    """Not the policy's: what the run's end event names its workflow by (read with the
    rest, so the tick that ends the run reads no workflow row)."""


@dataclass
class RunSnapshot:
    """A run as one unit of work read it: what the pure tick decides on."""

    run: RunRow
    """Its row as read, then as its tick wrote it (`persist.apply`)."""
    facts: WorkflowFacts
    locked: bool
    """Read under the run's lock; false: read unlocked (an answer, or a busy run)."""
    work: bool = False
    """Unlocked reads only: whether a tick would find anything to reconcile."""
    results: Mapping[str, JobResult] = field(default_factory=dict)
    """Locked: the results of the finished jobs its running nodes wait on."""
    started: Mapping[str, StartedJob] = field(default_factory=dict)
    """Locked: the jobs chain workers started for its pending nodes (adopted by this unit)."""
    plan_snapshot: dict[str, Any] | None = None
    """With `plan`: remembered ones from the read, else once loaded (`RunStore.complete`)."""
    plan: Plan | None = None
    states: Mapping[str, NodeState] | None = None
    """Every node state at the run's revision: remembered ones from the read, else once
    loaded (`RunStore.complete`); after a tick's write, the written ones."""

    @property
    def before(self) -> RunState:
        """The run-level fields as the tick takes them."""
        return from_attributes(RunState, self.run)

    @property
    def ticked(self) -> bool:
        """Ticked before (or ended): a tick without work to reconcile changes nothing."""
        return self.run.revision > 0 or self.run.status in RUN_TERMINAL
