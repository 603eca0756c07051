"""One service use case on the caller's behalf in one unit of work: the GraphQL door's
`Call.read` / `Call.write` (rest_compat.operations), so a resolver only maps its arguments
and the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, TypeVar, Unpack

import strawberry

from calcgraph.db.engine import wants_one_snapshot
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.resolvers.arguments import Paging, arguments, page_request
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.services import P, R, StagedUseCase, UseCase

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


async def staged(info: Info, use_case: StagedUseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """A use case that opens its own units of work: its write transaction is committed before
    the field returns (`calcgraph.services.StagedUseCase`)."""
    return await use_case(info.context.database, principal_of(info), *args, **kwargs)


async def read_page(
    info: Info,
    use_case: UseCase[Concatenate[PageRequest, P], Page[V]],
    paging: Paging,
    page_type: Callable[..., R],
    item: Callable[[V], T],
    *filters: P.args,
    **named: P.kwargs,
) -> R:
    """One page of a listing (`read`), each item as its GraphQL type: the `Paging` arguments
    every listing field takes, then the listing's own filters, answered as its `*Page` type."""
    page = await read(info, use_case, page_request(paging), *filters, **named)
    return page_of(page, page_type, item)


def page_of(page: Page[V], page_type: Callable[..., R], item: Callable[[V], T]) -> R:
    """A listing's page as its GraphQL `*Page` type."""
    return page_type(items=[item(v) for v in page.items], next_cursor=page.next_cursor)


def searched_listing(
    use_case: Callable[..., Awaitable[Page[V]]],
    page_type: type[R],
    item: Callable[[V], T],
    description: str,
) -> Any:
    """A listing field searched by name (`limit`, `cursor`, `search`), declared in one line
    where the same resolver would otherwise be written out for each listing."""

    async def resolve(info: Info, search: str | None = None, **paging: Unpack[Paging]) -> R:
        return await read_page(info, use_case, paging, page_type, item, search=search)

    # The annotations are text here (postponed); strawberry reads the answer's type from them.
    resolve.__annotations__ = {**resolve.__annotations__, "info": Info, "return": page_type}
    return strawberry.field(
        resolver=arguments(Paging, after="info")(resolve), description=description
    )
