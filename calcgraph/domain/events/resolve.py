"""Resolving a webhook host to its addresses, once per check (the caller connects to an
address it checked, never to the name again: no DNS rebinding between check and connect)."""

from __future__ import annotations

import asyncio
import socket

from calcgraph.domain.events.destinations import DestinationError, literal_address


async def resolve(host: str, port: int) -> list[str]:
    if literal_address(host) is not None:
        return [host]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise DestinationError(f"{host} does not resolve: {exc}") from None
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def resolve_sync(host: str, port: int) -> list[str]:
    """The same, for a worker thread."""
    if literal_address(host) is not None:
        return [host]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise DestinationError(f"{host} does not resolve: {exc}") from None
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses
