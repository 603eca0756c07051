"""GraphQL types that are a domain view field for field: their `from_view` is this one."""

from __future__ import annotations

from typing import Generic, Self, TypeVar

from calcgraph.domain.read_models import from_attributes

V = TypeVar("V")


class FromView(Generic[V]):
    """A type whose every field is read from the attribute of the same name of a `V`."""

    @classmethod
    def from_view(cls, view: V) -> Self:
        return from_attributes(cls, view)
