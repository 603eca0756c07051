"""What a process may remember between ticks of a run, and why each is safe. Pure.

- The plan (parsed) and its snapshot: frozen at run creation, never written again.
- The owner (function, package) of a function version, and a workflow version (graph and
  resolved functions, large documents): immutable rows.
- A run's node states *at a revision*: node states are written only at run creation and by
  ticks, and every tick that writes them bumps the revision under the run's lock, so a
  revision names one set of states. Only committed states are remembered: read from the
  database, or written by a tick and remembered after its commit (never before: the
  transaction could still roll back, and another tick would then write that revision).

Each map is a bounded LRU: a process serves many runs, and a miss only costs a read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.workflows.planner import Plan
from calcgraph.domain.workflows.views import WorkflowVersionView

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class RunMemo:
    def __init__(self, runs: int = 256, versions: int = 4096) -> None:
        self._plans: _Lru[str, tuple[dict[str, Any], Plan]] = _Lru(runs)
        self._states: _Lru[str, tuple[int, Mapping[str, NodeState]]] = _Lru(runs)
        self._owners: _Lru[str, tuple[str, str]] = _Lru(versions)
        self._workflow_versions: _Lru[str, WorkflowVersionView] = _Lru(runs)

    def plan(self, run_id: str) -> tuple[dict[str, Any], Plan] | None:
        return self._plans.get(run_id)

    def remember_plan(
        self, run_id: str, snapshot: dict[str, Any], plan: Plan
    ) -> tuple[dict[str, Any], Plan]:
        entry = (snapshot, plan)
        self._plans.put(run_id, entry)
        return entry

    def states(self, run_id: str, revision: int) -> Mapping[str, NodeState] | None:
        found = self._states.get(run_id)
        return found[1] if found is not None and found[0] == revision else None

    def remember_states(self, run_id: str, revision: int, states: Mapping[str, NodeState]) -> None:
        self._states.put(run_id, (revision, states))

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
        found: dict[str, WorkflowVersionView] = {}
        missing: list[str] = []
        for version_id in ids:
            version = self._workflow_versions.get(version_id)
            if version is None:
                missing.append(version_id)
            else:
                found[version_id] = version
        return found, missing

    def remember_workflow_versions(self, versions: Iterable[WorkflowVersionView]) -> None:
        for version in versions:
            self._workflow_versions.put(version.id, version)
