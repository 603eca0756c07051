"""One service use case on the caller's behalf in one unit of work: the GraphQL door's
`Call.read` / `Call.write` (rest_compat.operations), so a resolver only maps its arguments
and the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from calcgraph.db.engine import wants_one_snapshot
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.services import P, R, UseCase

V = TypeVar("V")
T = TypeVar("T")


async def read(info: Info, use_case: UseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """In a short read-only session of its own (resolvers of one query run concurrently)."""
    principal = principal_of(info)
    snapshot = wants_one_snapshot(use_case)
    async with info.context.database.read_session(snapshot=snapshot) as session:
        return await use_case(session, principal, *args, **kwargs)


async def write(info: Info, use_case: UseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """In one transaction, committed before the field returns (its jobs leave after it)."""
    principal = principal_of(info)
    async with info.context.database.write_session() as session:
        return await use_case(session, principal, *args, **kwargs)


async def read_page(
    info: Info,
    use_case: UseCase[[PageRequest], Page[V]],
    limit: int | None,
    cursor: str | None,
    page_type: Callable[..., R],
    item: Callable[[V], T],
) -> R:
    """One page of a listing with no filters (`read`), each item as its GraphQL type: the
    `limit` and `cursor` arguments every listing field takes, answered as its `*Page` type."""
    page = await read(info, use_case, PageRequest.parse(limit, cursor))
    return page_type(items=[item(v) for v in page.items], next_cursor=page.next_cursor)
