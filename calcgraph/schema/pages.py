"""The page every listing field answers: its items and the cursor of the next page. Each
listing's `*Page` type names its items' type once, in its base (`Page[ItemType]`), and says
what they are (`items=`)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, get_args, get_origin

import strawberry

T = TypeVar("T")


@strawberry.type
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = strawberry.field(description="Cursor of the next page, if any.")

    def __init_subclass__(cls, *, items: str, **kwargs: Any) -> None:
        """Declares the listing's `items` to strawberry, which reads the annotations after
        this: a list of the `T` of its `Page[T]` base, described as `items` says."""
        super().__init_subclass__(**kwargs)
        (base,) = [b for b in cls.__dict__["__orig_bases__"] if get_origin(b) is Page]
        shown: Any = list[get_args(base)[0]]  # type: ignore[misc]
        cls.__annotations__ = {"items": shown, **cls.__dict__.get("__annotations__", {})}
        cls.items = strawberry.field(description=items)
