"""The reads every repository of views shares: one view, a list of views, a page of views.

A repository of views declares `_views()`, the statement of one view per row (the model's row
and the names joined to it), and `_view(row)`, the view of one result row; the reads here only
add the WHERE, the order and the page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, select

from calcgraph.db.base import M, RepositoryBase
from calcgraph.db.keyset import keyset_page
from calcgraph.domain.access.paging import Created, Page, PageRequest, creation_key, make_page

V = TypeVar("V", bound=Created)


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
