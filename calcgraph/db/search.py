"""SQL of the listings' search and filters (`domain.access.filters`), shared by their
repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, true

from calcgraph.domain.access.filters import TimeRange


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
