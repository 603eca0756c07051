"""Argument sets several fields take alike, each declared once: a resolver takes one as
`**named: Unpack[TheSet]` (typed for mypy) and `arguments(TheSet)` shows strawberry its keys,
each an optional argument (default null) in the set's order, after the resolver's own."""

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


def owner(owned: Owned) -> tuple[str | None, str | None]:
    """The services' spelling of `Owned`: the visibility's value and the organization's slug."""
    return visibility_value(owned.get("visibility")), owned.get("organization")


def arguments(named: type) -> Callable[[F], F]:
    """The resolver's `**named` as the optional arguments `named` (a TypedDict) declares."""

    def declare(resolver: F) -> F:
        signature = inspect.signature(resolver)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint)
            for name, hint in get_type_hints(named).items()
        ]
        resolver.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        return resolver

    return declare
