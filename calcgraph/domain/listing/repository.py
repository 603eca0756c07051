"""All SQL of listings: the search and filters of `listing.filters`, the keyset condition of
every listing (the one place a cursor becomes a
WHERE) and the statement of one page; and the reads every repository of views shares: one view,
a list of views, a page of views.

A repository of views declares `_views()`, the statement of one view per row (the model's row
and the names joined to it), and `_view(row)`, the view of one result row; the reads here only
add the WHERE, the order and the page."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, Generic, TypeVar, TypeVarTuple

from sqlalchemy import ColumnElement, Select, and_, func, or_, select, true

from calcgraph.db.base import M, RepositoryBase
from calcgraph.domain.listing.filters import TimeRange
from calcgraph.domain.listing.paging import (
    Created,
    Page,
    PageRequest,
    creation_key,
    keyset,
    make_page,
)
from calcgraph.domain.read_models import grouped_by

Ts = TypeVarTuple("Ts")
V = TypeVar("V", bound=Created)


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


class ViewRepository(RepositoryBase[M], Generic[M, V]):
    def _views(self) -> Select[*tuple[Any, ...]]:
        raise NotImplementedError

    @staticmethod
    def _view(row: Any) -> V:
        raise NotImplementedError

    async def _first_view(self, *where: ColumnElement[bool]) -> V | None:
        row = (await self.session.execute(self._views().where(*where))).first()
        return self._view(row) if row is not None else None

    async def _views_in(
        self, column: Any, keys: Sequence[str], *where: ColumnElement[bool], order_by: Any = ()
    ) -> list[V]:
        """The views whose `column` is one of `keys` and that `where` selects (no keys, no
        statement)."""
        if not keys:
            return []
        query = self._views().where(column.in_(keys), *where).order_by(*order_by)
        return [self._view(row) for row in await self.session.execute(query)]

    async def _grouped_in(
        self, column: Any, keys: Sequence[str], *where: ColumnElement[bool], order_by: Any = ()
    ) -> dict[str, list[V]]:
        """`_views_in`, one list per key (empty when no view has it) as a DataLoader answers:
        each view under its own value of `column`'s attribute (`Function.package_id`: the
        view's `package_id`)."""
        views = await self._views_in(column, keys, *where, order_by=order_by)
        return grouped_by(keys, views, attrgetter(column.key))

    async def _ids_in(self, id_: Any, ids: Sequence[str], *where: ColumnElement[bool]) -> set[str]:
        """Which of `ids` (the model's `id_` column) `where` selects (no ids, no statement)."""
        if not ids:
            return set()
        return set(await self.session.scalars(select(id_).where(id_.in_(ids), *where)))

    async def _views_page(
        self, where: ColumnElement[bool], sort: Any, id_: Any, page: PageRequest
    ) -> Page[V]:
        """One page of the views `where` selects, by creation (`sort`, then `id_`)."""
        query = keyset_page(self._views().where(where), sort, id_, page)
        rows = await self.session.execute(query)
        return make_page([self._view(row) for row in rows], page.limit, creation_key)


# The listings' search and filters (`listing.filters`), as SQL.
def name_contains(column: Any, text: str | None) -> ColumnElement[bool]:
    """A case-insensitive substring match (`%` and `_` literal); everything when None."""
    if text is None:
        return true()
    return func.lower(column).contains(text.lower(), autoescape=True)


def in_range(column: Any, span: TimeRange) -> ColumnElement[bool]:
    """`column` within [after, before)."""
    clause: ColumnElement[bool] = true()
    if span.after is not None:
        clause = clause & (column >= span.after)
    if span.before is not None:
        clause = clause & (column < span.before)
    return clause
