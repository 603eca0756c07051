"""Argument sets several fields take alike, each declared once: a resolver takes one as
`**named: Unpack[TheSet]` (typed for mypy) and `arguments(TheSet)` shows strawberry its keys,
each an optional argument (default null) in the set's order, after the resolver's own (or
after the one it names)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypedDict, TypeVar, get_type_hints

from calcgraph.domain.listing.paging import PageRequest
from calcgraph.schema.packages import Visibility, visibility_value

F = TypeVar("F", bound=Callable[..., object])


class Owned(TypedDict, total=False):
    """Who a new package or workflow belongs to and who may see it (none: the caller alone,
    `private`)."""

    visibility: Visibility | None
    organization: str | None


def owner(owned: Owned) -> tuple[str | None, str | None]:
    """The services' spelling of `Owned`: the visibility's value and the organization's slug."""
    return visibility_value(owned.get("visibility")), owned.get("organization")


class Paging(TypedDict, total=False):
    """Which page of a listing: at most `limit` items (a default, and a most, per listing),
    after `cursor` (the `nextCursor` of the page before; none: the first page)."""

    limit: int | None
    cursor: str | None


def page_request(paging: Paging) -> PageRequest:
    """The listing services' spelling of `Paging`."""
    return PageRequest.parse(paging.get("limit"), paging.get("cursor"))


class EventFilter(TypedDict, total=False):
    """Which events: of these types (event types, or prefixes ending in `*`; none: all),
    about this subject, after this cursor."""

    types: list[str] | None
    subject: str | None
    after: str | None


def arguments(named: type, *, after: str | None = None) -> Callable[[F], F]:
    """The resolver's `**named` as the optional arguments `named` (a TypedDict) declares,
    after its own arguments, or after the one `after` names (`info`: before its own)."""

    def declare(resolver: F) -> F:
        signature = inspect.signature(resolver)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        at = len(own) if after is None else [p.name for p in own].index(after) + 1
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint)
            for name, hint in get_type_hints(named).items()
        ]
        # Keyword-only from the first added on: strawberry passes every argument by name.
        rest = [p.replace(kind=p.KEYWORD_ONLY) for p in own[at:]]
        shown = [*own[:at], *added, *rest]
        resolver.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
        return resolver

    return declare
