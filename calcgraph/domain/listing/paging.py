"""Keyset pagination shared by the listings: limits and opaque cursors. Pure."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from calcgraph.domain.errors import FieldError, ValidationError

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

T = TypeVar("T")


@dataclass(frozen=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    after: tuple[str, ...] | None = None
    """The sort key of the last row of the previous page, decoded from the cursor."""

    @classmethod
    def parse(cls, limit: int | str | None, cursor: str | None) -> PageRequest:
        return cls(limit=parse_limit(limit), after=decode_cursor(cursor) if cursor else None)


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    size_hint: int = 0
    """About how many bytes its values take when a listing measured them (0: small or not
    measured): a door writes a large answer off its event loop."""


def parse_limit(raw: int | str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(
            f"limit must be an integer from 1 to {MAX_LIMIT}",
            [FieldError(("query", "limit"), f"an integer from 1 to {MAX_LIMIT}")],
        )
    return limit


def encode_cursor(key: Sequence[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, ...]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(
            "cursor is not one this service issued",
            [FieldError(("query", "cursor"), "unknown cursor")],
        )
    return tuple(value)


@dataclass(frozen=True)
class Keyset:
    """Where a page starts: the sort time and id of the previous page's last row (every
    listing sorts by a timestamp, then the id to break ties)."""

    when: datetime
    last_id: str


def keyset(after: tuple[str, ...] | None) -> Keyset | None:
    """The position of a decoded cursor. Read when the listing's statement is built (after
    the request's other checks), so a well-formed cursor of another shape says so then."""
    if after is None:
        return None
    try:
        return Keyset(datetime.fromisoformat(after[0]), after[1])
    except (ValueError, IndexError):
        raise ValidationError(
            "cursor is not one this listing issued",
            [FieldError(("query", "cursor"), "unknown cursor")],
        ) from None


class Created(Protocol):
    """A row of a listing sorted by its creation time, then its id (oldest first)."""

    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


def creation_key(row: Created) -> tuple[str, str]:
    """The sort key (hence the cursor) of a row listed by creation time."""
    return (row.created_at.isoformat(), row.id)


def make_page(rows: list[T], limit: int, key_of: Callable[[T], Sequence[str]]) -> Page[T]:
    """`rows` holds up to limit + 1 rows; the extra one only says a next page exists."""
    if len(rows) > limit:
        items = rows[:limit]
        return Page(items=items, next_cursor=encode_cursor(key_of(items[-1])))
    return Page(items=rows, next_cursor=None)
