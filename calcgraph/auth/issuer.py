"""Which identity providers the API may trust over plain HTTP: only one on this machine.

Light on purpose: `calcgraph serve` checks its issuer before it starts, without loading the
identity stack that the application imports later.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_https(issuer: str) -> None:
    """Specification, Authentication 9: production requires HTTPS. Plain HTTP is only for an
    identity provider on this machine (the development one, tests)."""
    parts = urlsplit(issuer)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback(parts.hostname or ""):
        return
    raise ValueError(f"CALCGRAPH_OIDC_ISSUER must be an https:// URL (or loopback), not {issuer}")
