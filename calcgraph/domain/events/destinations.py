"""Which webhook destinations may be contacted (contract section 9, Destinations): `http`
and `https` URLs whose host's address is not loopback, private, link-local, unique-local,
multicast, unspecified or reserved, unless the host, the address or a block holding it is on
the operator's allow list. The check is made at creation on every address the host resolves
to, and at delivery on the one address connected to. Pure."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

MAX_URL_LENGTH = 2048

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class DestinationError(ValueError):
    """A destination refused; the message says why."""


@dataclass(frozen=True)
class AllowList:
    names: frozenset[str]
    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        names: set[str] = set()
        networks: list[Network] = []
        for entry in entries:
            entry = entry.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if any(c.isspace() for c in entry) or "/" in entry or "\x00" in entry:
                raise ValueError(f"{entry!r} is neither a host name, an address nor a CIDR block")
            names.add(entry.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def allows_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.names

    def allows_address(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks)


def _forbidden(address: IPAddress) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for flag, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(address, flag):
            return what
    if isinstance(address, ipaddress.IPv6Address) and address in ipaddress.ip_network("fc00::/7"):
        return "unique-local"
    return None


@dataclass(frozen=True)
class Destination:
    url: str
    scheme: str
    host: str
    port: int
    path: str
    """Path and query, as sent."""


def parse_url(url: str) -> Destination:
    """The URL's parts, or DestinationError: http/https only, a host, no credentials."""
    if len(url) > MAX_URL_LENGTH:
        raise DestinationError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise DestinationError("the URL holds spaces or control characters")
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationError(f"the URL is invalid: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationError("only http and https URLs are allowed")
    if not parts.hostname:
        raise DestinationError("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise DestinationError("the URL may not carry credentials")
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    return Destination(
        url,
        parts.scheme,
        parts.hostname,
        port if port is not None else (443 if parts.scheme == "https" else 80),
        path,
    )


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def check_address(host: str, address: str, allow: AllowList) -> None:
    """Refuse `address` (one the host resolved to) unless it is public or allowed."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if allow.allows_host(host) or allow.allows_address(parsed):
        return
    reason = _forbidden(parsed)
    if reason is not None:
        raise DestinationError(
            f"{host} resolves to {parsed}, a {reason} address: not a webhook destination"
        )


def check_addresses(host: str, addresses: Sequence[str], allow: AllowList) -> None:
    if not addresses:
        raise DestinationError(f"{host} does not resolve")
    for address in addresses:
        check_address(host, address, allow)
