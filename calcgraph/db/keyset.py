"""The keyset condition of every listing, as SQL: the one place a cursor becomes a WHERE, and
the statement of one page."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVarTuple

from sqlalchemy import ColumnElement, Select, and_, or_, true

from calcgraph.domain.access.paging import PageRequest, keyset

Ts = TypeVarTuple("Ts")


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


def keyset_page(query: Select[*Ts], sort: Any, id_: Any, page: PageRequest) -> Select[*Ts]:
    """One page of a listing sorted by (sort, id), oldest first: the rows after the cursor,
    one more than the limit (the extra row only says a next page exists; see `make_page`)."""
    after = keyset_clause(sort, id_, page.after)
    return query.where(after).order_by(sort, id_).limit(page.limit + 1)
