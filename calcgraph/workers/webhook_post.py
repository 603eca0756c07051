"""One webhook attempt (contract section 9): the host is resolved once, the address connected
to is checked (loopback, private, link-local... refused unless allowed), and the event is
POSTed to that address (Host and TLS name kept) with its Standard Webhooks signature
(`standardwebhooks`), no redirects followed, 10 s at most in all, the answer's body never
read. Sent by `calcgraph.workers.webhooks`."""

from __future__ import annotations

import asyncio
import ssl
import time
from datetime import UTC, datetime
from typing import Any

import certifi
import httpx
from standardwebhooks.webhooks import Webhook as Signer

from calcgraph.db.base import utcnow
from calcgraph.domain.events.destinations import (
    AllowList,
    DestinationError,
    check_address,
    parse_url,
)
from calcgraph.domain.events.envelope import CONTENT_TYPE, body
from calcgraph.domain.events.resolve import resolve
from calcgraph.domain.webhooks.delivery.service import Attempt, Outcome

TIMEOUT_SECONDS = 10.0
_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every attempt (building one costs milliseconds of CPU)."""
    global _tls
    if _tls is None:
        _tls = ssl.create_default_context(cafile=certifi.where())
    return _tls


async def post(attempt: Attempt, allow: AllowList, limit_s: float = TIMEOUT_SECONDS) -> Outcome:
    """Send one attempt; the outcome (never raises for the receiver's faults)."""
    started = time.monotonic()
    attempted_at = utcnow()

    def outcome(status: int | None, error: str | None) -> Outcome:
        return Outcome(status, error, int((time.monotonic() - started) * 1000), attempted_at)

    try:
        destination = parse_url(attempt.url)
        addresses = await resolve(destination.host, destination.port)
        if not addresses:
            raise DestinationError(f"{destination.host} does not resolve")
        address = addresses[0]
        check_address(destination.host, address, allow)
    except DestinationError as exc:
        return outcome(None, f"refused: {exc}")
    payload = body(attempt.event)
    now = datetime.now(UTC)
    signature = Signer(attempt.secret).sign(
        msg_id=attempt.event.id, timestamp=now, data=payload.decode()
    )
    default_port = 443 if destination.scheme == "https" else 80
    netloc = destination.host if ":" not in destination.host else f"[{destination.host}]"
    if destination.port != default_port:
        netloc += f":{destination.port}"
    literal = f"[{address}]" if ":" in address else address
    url = f"{destination.scheme}://{literal}:{destination.port}{destination.path}"
    headers = {
        "Host": netloc,
        "Content-Type": CONTENT_TYPE,
        "User-Agent": "calcgraph-webhooks",
        "webhook-id": attempt.event.id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    extensions: dict[str, Any] = {}
    verify: ssl.SSLContext | bool = False
    if destination.scheme == "https":
        extensions["sni_hostname"] = destination.host
        verify = _tls_context()
    try:
        # The whole attempt within `limit_s` (httpx's own timeouts are per read: a receiver
        # that trickles its answer would otherwise hold the attempt for ever).
        async with (
            asyncio.timeout(limit_s),
            httpx.AsyncClient(
                follow_redirects=False, timeout=limit_s, trust_env=False, verify=verify
            ) as client,
            client.stream(
                "POST", url, content=payload, headers=headers, extensions=extensions
            ) as response,
        ):
            # The status line and headers are the answer; its body is never read.
            status = response.status_code
    except (TimeoutError, httpx.TimeoutException):
        return outcome(None, f"no answer within {limit_s:g} s")
    except httpx.HTTPError as exc:
        return outcome(None, f"{type(exc).__name__}: {exc}"[:500])
    if 200 <= status < 300:
        return outcome(status, None)
    if 300 <= status < 400:
        return outcome(status, "redirects are not followed")
    return outcome(status, f"the receiver answered {status}")
