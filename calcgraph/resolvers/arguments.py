"""Argument sets several fields take alike, each declared once: a resolver takes one as
`**named: Unpack[TheSet]` (typed for mypy) and `arguments(TheSet)` shows strawberry its keys,
each an optional argument (default null) in the set's order, after the resolver's own (or
before them: `first`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypedDict, TypeVar, get_type_hints

from calcgraph.schema.packages import Visibility, visibility_value

F = TypeVar("F", bound=Callable[..., object])


class Owned(TypedDict, total=False):
    """Who a new package or workflow belongs to and who may see it (none: the caller's own,
    `private`)."""

    visibility: Visibility | None
    organization: str | None


class EventFilter(TypedDict, total=False):
    """Which events: of these types (event types, or prefixes ending in `*`; none: all),
    about this subject, after this cursor."""

    types: list[str] | None
    subject: str | None
    after: str | None


def owner(owned: Owned) -> tuple[str | None, str | None]:
    """The services' spelling of `Owned`: the visibility's value and the organization's slug."""
    return visibility_value(owned.get("visibility")), owned.get("organization")


def arguments(named: type, *, first: bool = False) -> Callable[[F], F]:
    """The resolver's `**named` as the optional arguments `named` (a TypedDict) declares,
    after its own arguments, or before them (after `self` and `info`) when `first`."""

    def declare(resolver: F) -> F:
        signature = inspect.signature(resolver)
        given = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        reserved = [p for p in given if p.name in ("self", "info")]
        # Keyword-only from here on: strawberry passes every argument by name.
        own = [p.replace(kind=p.KEYWORD_ONLY) for p in given if p not in reserved]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint)
            for name, hint in get_type_hints(named).items()
        ]
        shown = [*reserved, *added, *own] if first else [*reserved, *own, *added]
        resolver.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
        return resolver

    return declare
