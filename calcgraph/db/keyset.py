"""The keyset condition of every listing, as SQL: the one place a cursor becomes a WHERE."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, true

from calcgraph.domain.access.paging import keyset


def keyset_clause(
    sort: Any, id_: Any, after: tuple[str, ...] | None, *, newest_first: bool = False
) -> ColumnElement[bool]:
    """Rows strictly after the cursor's (sort, id) in the listing's order, written portably
    (no row values). `newest_first`: the listing orders by `sort DESC, id DESC`."""
    position = keyset(after)
    if position is None:
        return true()
    when: datetime = position.when
    if newest_first:
        return or_(sort < when, and_(sort == when, id_ < position.last_id))
    return or_(sort > when, and_(sort == when, id_ > position.last_id))
