"""Resolving a webhook host to its addresses, once per check (the caller connects to an
address it checked, never to the name again: no DNS rebinding between check and connect)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

from calcgraph.domain.events.destinations import DestinationError, literal_address


async def resolve(host: str, port: int) -> list[str]:
    if literal_address(host) is not None:
        return [host]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _unresolved(host, exc) from None
    return _addresses(infos)


def resolve_sync(host: str, port: int) -> list[str]:
    """The same, for a worker thread."""
    if literal_address(host) is not None:
        return [host]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _unresolved(host, exc) from None
    return _addresses(infos)


def _unresolved(host: str, exc: Exception) -> DestinationError:
    return DestinationError(f"{host} does not resolve: {exc}")


def _addresses(infos: Iterable[tuple[Any, ...]]) -> list[str]:
    """The addresses of `getaddrinfo`'s answers, each once, in the order given."""
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
