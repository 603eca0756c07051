"""SQL of node state pages: a run's nodes by key, a page at a time, for many runs at once.

Every statement reaches the rows through the primary key (run_id, node_key), in key order, so
a page of a 10,000-node run reads the page, not the run (on PostgreSQL with sorts planned last,
on fresh tables too: `dialect.without_sorts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, func, select, tuple_

from calcgraph.db.base import RepositoryBase
from calcgraph.db.dialect import without_sorts
from calcgraph.domain.runs.models import NodeState as NodeRowModel
from calcgraph.domain.runs.state import NODE_STATE_FIELDS
from calcgraph.domain.runs.statements.repository import state
from calcgraph.domain.runs.views import NodeRow

_NODES = cast(Table, NodeRowModel.__table__)
# Table columns, not the model's: rows without the ORM's per-row loading.
_COLUMNS = tuple(_NODES.c[name] for name in ("run_id", "node_key", "kind", *NODE_STATE_FIELDS))


def _row(row: Any) -> NodeRow:
    # `state` reads a row shaped like `STATE_COLUMNS` and skips its first value (`kind` here).
    return NodeRow(row.run_id, row.node_key, row.kind, state(row[2:]))


class NodePageRepository(RepositoryBase[NodeRowModel]):
    model = NodeRowModel

    async def pages(
        self,
        run_ids: Sequence[str],
        *,
        after: str | None,
        limit: int | None,
        statuses: Sequence[str],
    ) -> list[NodeRow]:
        """Up to `limit` nodes of each run (all with None) whose key sorts after `after`, in
        `statuses` (any when empty), by run and key: one statement for all the runs."""
        if not run_ids:
            return []
        query = select(*_COLUMNS).where(_NODES.c.run_id.in_(run_ids))
        if after is not None:
            query = query.where(_NODES.c.node_key > after)
        if statuses:
            query = query.where(_NODES.c.status.in_(statuses))
        if limit is not None and len(run_ids) > 1:
            # Each run's first `limit` rows: numbered within the run, in key order.
            rank = (
                func.row_number()
                .over(partition_by=_NODES.c.run_id, order_by=_NODES.c.node_key)
                .label("rank")
            )
            ranked = query.add_columns(rank).subquery()
            query = select(*(ranked.c[c.key] for c in _COLUMNS)).where(ranked.c.rank <= limit)
            query = query.order_by(ranked.c.run_id, ranked.c.node_key)
        else:
            query = query.order_by(_NODES.c.run_id, _NODES.c.node_key)
            if limit is not None:
                query = query.limit(limit)
        steer = without_sorts(self.session.get_bind().dialect.name)
        if limit is not None and steer is not None:
            # The primary key read in order, whatever the statistics say of the run (and as
            # many statements for one run as for several).
            await self.session.execute(steer)
        return [_row(row) for row in await self.session.execute(query)]

    async def by_keys(self, keys: Sequence[tuple[str, str]]) -> list[NodeRow]:
        """The nodes named by (run id, node key), those that exist."""
        if not keys:
            return []
        query = select(*_COLUMNS).where(tuple_(_NODES.c.run_id, _NODES.c.node_key).in_(list(keys)))
        return [_row(row) for row in await self.session.execute(query)]
