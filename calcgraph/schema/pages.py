"""The page every listing field answers: its items and the cursor of the next page. Each
listing's `*Page` type names its items (and says what they are)."""

from __future__ import annotations

from typing import Generic, TypeVar

import strawberry

T = TypeVar("T")


@strawberry.type
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = strawberry.field(description="Cursor of the next page, if any.")
