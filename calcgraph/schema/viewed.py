"""GraphQL types that are a domain view field for field: each field is declared once, in the
view; the GraphQL type adds only its descriptions (and the few types GraphQL spells
otherwise), so the two cannot drift apart."""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable, Iterator, Mapping
from typing import (
    Any,
    ClassVar,
    Generic,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.read_models import from_attributes

V = TypeVar("V")
C = TypeVar("C", bound="type[FromView[Any]]")


class FromView(Generic[V]):
    """A type whose every field is read from the attribute of the same name of a `V`."""

    view: V
    """The view shown (a private field, no GraphQL one): what resolvers read, typed."""

    nested: ClassVar[Mapping[str, tuple[type[FromView[Any]], bool]]] = {}
    """The fields that show views of their own, by name: the type of each view, and whether
    the field is a list of them (`view_fields` reads both from the types it is given)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Declares `view` to strawberry, which reads the annotations after this: a private
        field (mypy reads its type above)."""
        super().__init_subclass__(**kwargs)
        cls.__annotations__ = {
            **cls.__dict__.get("__annotations__", {}),
            "view": strawberry.Private[object],
        }

    @classmethod
    def from_view(cls, view: V) -> Self:
        return cls.viewing(view)

    @classmethod
    def viewing(cls, view: V, **given: Any) -> Self:
        """The type of `view`, with the fields that differ from its attributes `given`; a
        `nested` field not given is its view's items, each as its type."""
        for name, (shown, many) in cls.nested.items():
            if name not in given:
                value = getattr(view, name)
                given[name] = (
                    [shown.from_view(v) for v in value] if many else shown.from_view(value)
                )
        return from_attributes(cls, view, view=view, **given)


def graphql_type(hint: object) -> object:
    """A view attribute's type as GraphQL shows it: anything holding a mapping is JSON, a
    tuple of items a list of them; optional stays optional."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any or origin is dict:
        return JSON
    if origin in (Union, types.UnionType):
        shown = [graphql_type(arg) for arg in args]
        if JSON in shown:
            return JSON | None if types.NoneType in args else JSON
        return functools.reduce(operator.or_, shown)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return list[graphql_type(args[0])]  # type: ignore[misc]
    return hint


def _view_of(cls: type) -> type:
    """The `V` of a `FromView[V]` base."""
    for base in getattr(cls, "__orig_bases__", ()):
        if get_origin(base) is FromView:
            view: type = get_args(base)[0]
            return view
    raise TypeError(f"{cls.__name__} is no FromView[...]")


def _nested(
    shown_as: Mapping[str, object],
) -> Iterator[tuple[str, tuple[type[FromView[Any]], bool]]]:
    """The fields of `shown_as` that show a `FromView` type, or a list of one."""
    for name, shown in shown_as.items():
        many = get_origin(shown) is list
        item = get_args(shown)[0] if many else shown
        if isinstance(item, type) and issubclass(item, FromView):
            yield name, (item, many)


def view_fields(descriptions: Mapping[str, str], **shown_as: object) -> Callable[[C], C]:
    """Under `strawberry.type`: the fields `descriptions` names, in its order and before the
    class's own, each with its description and the type of the view's attribute of that name
    (`graphql_type`), or the one `shown_as` gives (an id, a nested type, a field the view
    computes)."""

    def declare(cls: C) -> C:
        hints = get_type_hints(_view_of(cls))
        own = dict(cls.__dict__.get("__annotations__", {}))
        declared: dict[str, object] = {}
        for name, description in descriptions.items():
            declared[name] = shown_as[name] if name in shown_as else graphql_type(hints[name])
            setattr(cls, name, strawberry.field(description=description))
        cls.nested = dict(_nested(shown_as))
        cls.__annotations__ = {**declared, **own}
        return cls

    return declare
