"""The one shape of a per-request DataLoader: each batch opens its own short-lived read
session (never one shared between concurrently resolving fields) and answers every key, with
`default()` where the fetch found nothing (a hidden or missing object, an empty list)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from calcgraph.db.engine import Database

V = TypeVar("V")
L = TypeVar("L", bound=DataLoader[Any, Any])


def none() -> None:
    """The `default` of a loader whose key may find nothing (hidden or missing): null."""
    return None


def session_loader(
    kind: type[L],
    database: Database,
    fetch: Callable[[AsyncSession, list[str]], Awaitable[dict[str, V]]],
    default: Callable[[], V],
) -> L:
    async def batch(keys: list[str]) -> list[V]:
        async with database.read_session() as session:
            found = await fetch(session, keys)
        return [found.get(key, default()) for key in keys]

    return kind(load_fn=batch)
