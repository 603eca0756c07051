"""Use cases that are one read of a repository on the caller's behalf, declared once: the
listing of each catalogue (packages, functions, workflows), what the caller may see a page at a
time narrowed by a name search; and a repository's read under the caller's principal (the
visibility rule is the repository's SQL)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Concatenate, Generic, ParamSpec, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.listing.filters import parse_search
from calcgraph.domain.listing.paging import Page, PageRequest

V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")
Repo = TypeVar("Repo")


class SearchedRepository(Protocol[V]):
    """A repository whose listing applies the access clause and a parsed name search (what the
    search matches is the repository's: a name, `package/name`, a slug or a name)."""

    async def list_visible(
        self, principal: Principal, page: PageRequest, *, search: str | None = None
    ) -> Page[V]: ...


@dataclass(frozen=True)
class VisibleListing(Generic[V]):
    """`(session, principal, page, search=)`: the page of what the caller may see; `search` is
    a case-insensitive part of what the repository searches, checked by `parse_search`."""

    repository: Callable[[AsyncSession], SearchedRepository[V]]

    async def __call__(
        self,
        session: AsyncSession,
        principal: Principal,
        page: PageRequest,
        *,
        search: str | None = None,
    ) -> Page[V]:
        return await self.repository(session).list_visible(
            principal, page, search=parse_search(search, "search")
        )


@dataclass(frozen=True)
class RepositoryRead(Generic[Repo, P, R]):
    """`(session, principal, *arguments)`: `read` of the session's repository for the caller;
    `read` is the repository's method, e.g. `PackageRepository.visible_by_organization`."""

    repository: Callable[[AsyncSession], Repo]
    read: Callable[Concatenate[Repo, Principal, P], Awaitable[R]]

    async def __call__(
        self, session: AsyncSession, principal: Principal, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return await self.read(self.repository(session), principal, *args, **kwargs)
