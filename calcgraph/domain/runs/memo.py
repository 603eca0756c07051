"""What a process may remember between ticks of a run, and why each is safe. Pure.

- The plan (parsed) and its snapshot: frozen at run creation, never written again.
- The owner (function, package) of a function version, and a workflow version (graph and
  resolved functions, large documents): immutable rows.
- A run's node states *at a revision*: node states are written only at run creation and by
  ticks, and every tick that writes them bumps the revision under the run's lock, so a
  revision names one set of states. Only committed states are remembered: read from the
  database, or written by a tick and remembered after its commit (never before: the
  transaction could still roll back, and another tick would then write that revision).

- What this process's last tick of a run left (`KeptAnswer`), under the run's change token
  (`calcgraph.domain.runs.changes`): a tick that had nothing to do, its answer under the token
  read before the answer was (while the token is the same, no unit of work changed the run,
  so the same tick answers the same); a tick that changed the run, no answer, under the token
  its commit renewed (noted after the commit). With it the run's access facts (its user, its
  workflow's owner, organization and visibility: none of them is ever written after
  creation) and its retry time. An answer is kept at most `ANSWER_MAX_AGE_S`: a mark lost to
  a Redis outage hides a change no longer than that.

Each map is a bounded LRU: a process serves many runs, and a miss only costs a read. A run
that ended is forgotten (`forget`): a process that runs big runs one after another keeps none
of the finished ones (three 10,000-node runs would hold over 50 MB). The maps of runs are
bounded by their nodes too: 256 runs of 10,000 nodes would hold gigabytes, so a
process keeps at most `nodes` nodes' worth of plans, states and workflow versions in each.
The count of runs is bounded far above what a process polls at once: at 256, 500 small runs
polled in turn each missed at every tick (two more reads, the plan parsed again).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from calcgraph.domain.runs.changes import Token
from calcgraph.domain.runs.create.planned import PlannedVersion
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.runs.views import RunView
from calcgraph.domain.workflows.planner import Plan
from calcgraph.domain.workflows.views import WorkflowVersionView

K = TypeVar("K")
V = TypeVar("V")


def _one(value: object) -> int:
    return 1


class _Lru(Generic[K, V]):
    """At most `size` items and `weight` in all (each item weighs `weigh(value)`); the item
    just put is kept even when it alone weighs more."""

    def __init__(
        self, size: int, weight: int | None = None, weigh: Callable[[V], int] = _one
    ) -> None:
        self.size = size
        self.weight = weight
        self._weigh = weigh
        self._total = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._total -= old[1]
        weight = self._weigh(value)
        self._items[key] = (value, weight)
        self._total += weight
        while len(self._items) > 1 and (
            len(self._items) > self.size or (self.weight is not None and self._total > self.weight)
        ):
            _, (_, dropped) = self._items.popitem(last=False)
            self._total -= dropped

    def pop(self, key: K) -> None:
        found = self._items.pop(key, None)
        if found is not None:
            self._total -= found[1]

    def __len__(self) -> int:
        return len(self._items)


def _plan_nodes(entry: tuple[dict[str, Any], Plan]) -> int:
    return max(1, len(entry[1].nodes))


def _planned_nodes(planned: PlannedVersion) -> int:
    return max(1, len(planned.frozen.nodes))


def _state_nodes(entry: tuple[int, Mapping[str, NodeState]]) -> int:
    return max(1, len(entry[1]))


def _graph_nodes(version: WorkflowVersionView) -> int:
    nodes = version.graph.get("nodes") if isinstance(version.graph, dict) else None
    return max(1, len(nodes) if isinstance(nodes, list) else 1)


def _remembered(keys: Sequence[K], lookup: Callable[[K], V | None]) -> tuple[dict[K, V], list[K]]:
    """What `lookup` remembers of `keys`, and the keys it does not."""
    found: dict[K, V] = {}
    missing: list[K] = []
    for key in keys:
        value = lookup(key)
        if value is None:
            missing.append(key)
        else:
            found[key] = value
    return found, missing


ANSWER_MAX_AGE_S = 30.0
_SINCES = 4


@dataclass
class KeptAnswer:
    """What this process's last tick of a run left: the answers of a tick that had nothing to
    do, by `since` (None: every state), under the token read before them; none after a tick
    that changed the run, under the token its commit renewed."""

    token: Token | None
    """None: a tick of this process changed the run and the token after its commit is not
    noted yet (`RunMemo.note_token`)."""
    user_id: str
    owner_id: str
    organization_id: str | None
    visibility: str
    retry_at: datetime | None
    kept_at: float
    views: dict[int | None, RunView] = field(default_factory=dict)

    def current(self, token: Token, now: float) -> bool:
        """Kept under `token`, the run's token now, and not older than `ANSWER_MAX_AGE_S`."""
        return self.token == token and now - self.kept_at <= ANSWER_MAX_AGE_S


def _answer_nodes(entry: KeptAnswer) -> int:
    return max(1, sum(len(v.node_states or ()) for v in entry.views.values()))


class RunMemo:
    def __init__(self, runs: int = 8192, versions: int = 4096, nodes: int = 100_000) -> None:
        # A run's plan snapshot and plan, and its node states at a revision: read and written
        # by `RunStore` (`calcgraph.domain.runs.store.repository`), the one that decides when.
        self.plans: _Lru[str, tuple[dict[str, Any], Plan]] = _Lru(runs, nodes, _plan_nodes)
        self.states: _Lru[str, tuple[int, Mapping[str, NodeState]]] = _Lru(
            runs, nodes, _state_nodes
        )
        self._owners: _Lru[str, tuple[str, str]] = _Lru(versions)
        self._workflow_versions: _Lru[str, WorkflowVersionView] = _Lru(runs, nodes, _graph_nodes)
        # A workflow's version by its number (run creation) and a function version's retry
        # default from its manifest (False: it declares none): immutable rows, as above.
        self._numbered: _Lru[tuple[str, int], WorkflowVersionView] = _Lru(
            versions, nodes, _graph_nodes
        )
        self._retry_defaults: _Lru[str, dict[str, Any] | bool] = _Lru(versions)
        # A workflow version's plan as every run of it freezes it (`create.service`): the
        # same for each run, made once (a second of pure work at 12,000 nodes).
        self._planned: _Lru[str, PlannedVersion] = _Lru(versions, nodes, _planned_nodes)
        # What this process's last tick of a run left: read by `RunService.kept`, written by
        # `RunStore` (`keep_answer` when it answered, after a change when it wrote).
        self.answers: _Lru[str, KeptAnswer] = _Lru(runs, nodes, _answer_nodes)

    def expects_work(self, run_id: str, token: Token | None) -> bool:
        """The next tick of the run most likely has work, so it goes straight to the run's
        lock, without the unlocked read that would only find that work first:
        - the run was created in this process and not ticked here since (its states are
          remembered at revision 0): its first tick submits every ready node (the 500 first
          ticks of 500 new runs come at once). Only a hint: a run another process ticked is
          found so under the lock, which spends the hint (`RunStore.read`);
        - with the run's `token`: another unit of work than this process's ticks changed the
          run (a job ended, a chain worker, another process): the token is no longer the one
          this process's last tick of the run left (read before its answer was kept, or
          noted after its change committed). Not known (a change not noted yet): no."""
        remembered = self.states.get(run_id)
        if remembered is not None and remembered[0] == 0:
            return True
        last = self.answers.get(run_id) if token is not None else None
        return last is not None and last.token is not None and last.token != token

    def note_token(self, run_id: str, token: Token | None) -> None:
        """The run's token after this process's tick changed it and committed, as this
        process's mark set it (None: not known), noted only when the run's last tick here
        changed it (one that changed nothing left the token it answered under). A unit of
        work of another that renewed it in between hides in it: the next tick then reads
        unlocked first, as it would without the note."""
        last = self.answers.get(run_id)
        if last is not None and last.token is None:
            last.token = token

    def keep_answer(self, run_id: str, kept: KeptAnswer, since: int | None, view: RunView) -> None:
        """Keep `view`, a tick's answer with `since`, beside those kept under the same token."""
        found = self.answers.get(run_id)
        if found is not None and found.token == kept.token and 0 < len(found.views) < _SINCES:
            kept.views = {**found.views}
            kept.kept_at = found.kept_at  # each view's age is the oldest's
        kept.views[since] = view
        self.answers.put(run_id, kept)

    def forget(self, run_id: str) -> None:
        """A run that ended: no tick will advance it again, so its plan and states (tens of
        megabytes at 10,000 nodes) leave the memo, and what its ending tick left (its next
        tick reads it); a read of it reads the database."""
        self.plans.pop(run_id)
        self.states.pop(run_id)
        self.answers.pop(run_id)

    def owners(self, version_ids: set[str]) -> dict[str, tuple[str, str]] | None:
        """Every version's owner, or None when one of them is not remembered."""
        found = {v: self._owners.get(v) for v in version_ids}
        if any(owner is None for owner in found.values()):
            return None
        return {v: owner for v, owner in found.items() if owner is not None}

    def remember_owners(self, owners: Mapping[str, tuple[str, str]]) -> None:
        for version_id, owner in owners.items():
            self._owners.put(version_id, owner)

    def workflow_versions(
        self, ids: Sequence[str]
    ) -> tuple[dict[str, WorkflowVersionView], list[str]]:
        """The remembered versions among `ids`, and the ids not remembered."""
        return _remembered(ids, self._workflow_versions.get)

    def plan_snapshots(self, run_ids: Sequence[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The remembered plan snapshots among `run_ids`, and the ids not remembered."""

        def snapshot(run_id: str) -> dict[str, Any] | None:
            entry = self.plans.get(run_id)
            return None if entry is None else entry[0]

        return _remembered(run_ids, snapshot)

    def workflow_version(self, workflow_id: str, number: int) -> WorkflowVersionView | None:
        return self._numbered.get((workflow_id, number))

    def remember_workflow_version(
        self, workflow_id: str, number: int, version: WorkflowVersionView
    ) -> None:
        self._numbered.put((workflow_id, number), version)

    def retry_defaults(self, version_ids: Iterable[str]) -> dict[str, dict[str, Any]] | None:
        """The retry default of each version that declares one, or None when one of them is
        not remembered."""
        found: dict[str, dict[str, Any]] = {}
        for version_id in version_ids:
            default = self._retry_defaults.get(version_id)
            if default is None:
                return None
            if isinstance(default, dict):
                found[version_id] = default
        return found

    def remember_retry_defaults(
        self, version_ids: Iterable[str], defaults: Mapping[str, dict[str, Any]]
    ) -> None:
        for version_id in version_ids:
            self._retry_defaults.put(version_id, defaults.get(version_id, False))

    def planned(self, version_id: str) -> PlannedVersion | None:
        return self._planned.get(version_id)

    def remember_planned(self, version_id: str, planned: PlannedVersion) -> None:
        self._planned.put(version_id, planned)

    def remember_workflow_versions(self, versions: Iterable[WorkflowVersionView]) -> None:
        for version in versions:
            self._workflow_versions.put(version.id, version)
