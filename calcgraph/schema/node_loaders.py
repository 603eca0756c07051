"""Per-request DataLoaders of node state pages: `nodeStates(first, after, status)` on many runs
(a listing of runs, aliases) costs one statement per distinct page shape, and `nodeState(key)`
one statement for every key asked in the request. Reached only from runs the caller read."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database
from calcgraph.domain.runs.nodes.service import node_page_service
from calcgraph.domain.runs.views import NodeRow

PageKey = tuple[str, str | None, int | None, tuple[str, ...]]
"""(run id, after, first, statuses)"""


class NodePageLoader(DataLoader[PageKey, list[NodeRow]]):
    """A page of a run's node states."""


class NodeByKeyLoader(DataLoader[tuple[str, str], NodeRow | None]):
    """One node state by (run id, node key)."""


@dataclass
class NodeLoaders:
    page: NodePageLoader
    by_key: NodeByKeyLoader

    @classmethod
    def build(cls, database: Database) -> NodeLoaders:
        async def pages(keys: list[PageKey]) -> list[list[NodeRow]]:
            shapes: dict[tuple[str | None, int | None, tuple[str, ...]], list[str]] = defaultdict(
                list
            )
            for run_id, after, first, statuses in keys:
                shapes[(after, first, statuses)].append(run_id)
            found: dict[PageKey, list[NodeRow]] = {}
            # One transaction: a page steers its plan with SET LOCAL (`dialect.without_sorts`).
            async with database.read_session(one_transaction=True) as session:
                for (after, first, statuses), run_ids in shapes.items():
                    by_run = await node_page_service.pages(
                        session, run_ids, after=after, first=first, statuses=statuses
                    )
                    for run_id, rows in by_run.items():
                        found[(run_id, after, first, statuses)] = rows
            return [found[key] for key in keys]

        async def by_key(keys: list[tuple[str, str]]) -> list[NodeRow | None]:
            async with database.read_session() as session:
                found = await node_page_service.by_keys(session, keys)
            return [found.get(key) for key in keys]

        return cls(page=NodePageLoader(load_fn=pages), by_key=NodeByKeyLoader(load_fn=by_key))
