"""Building one read model from another object's same-named attributes. Pure.

Views, GraphQL types and ORM rows of one thing share their field names, so a read model is the
source's attributes under its own field names, plus the few that differ (`given`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per class once: read models are built per row, thousands to a response."""


def _init_fields(cls: type) -> tuple[str, ...]:
    names = _INIT_FIELDS.get(cls)
    if names is None:
        names = _INIT_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.init)
    return names


def from_attributes(cls: type[T], source: object, **given: Any) -> T:
    """`cls` (a dataclass) with each init field read from `source`, except those `given`."""
    names = _init_fields(cls)
    return cls(**given, **{name: getattr(source, name) for name in names if name not in given})


def attributes(source: object, *names: str) -> dict[str, Any]:
    """The named attributes of `source`, in that order: a read model's JSON entry."""
    return {name: getattr(source, name) for name in names}


def grouped_by(keys: Iterable[K], rows: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """`rows` under their `key`, every one of `keys` present (empty when no row has it), as a
    DataLoader answers one list per requested key."""
    grouped: dict[K, list[T]] = {k: [] for k in keys}
    for row in rows:
        grouped[key(row)].append(row)
    return grouped
