"""Webhook delivery on the workers (contract section 9), never on the API's event loop.

`WebhookTimer`, in every worker process, every `webhook_dispatch_interval_seconds`: fans the
newly numbered events out to the webhooks that match them (one delivery row per webhook and
event, in the unit of work that moves the fan-out's cursor), leases the attempts due now and
sends each to the `webhooks.deliver` actor after that commit, and every
`event_prune_interval_seconds` deletes the events older than `event_retention_days` (their
deliveries with them). Two processes' timers never fan an event out twice (the cursor's
guarded move) nor send one attempt twice at once (the lease).

`webhooks.deliver`: one attempt, in a worker thread: the host is resolved once, the address
connected to is checked (loopback, private, link-local... refused unless allowed), and the
event is POSTed to that address (Host and TLS name kept) with its Standard Webhooks signature
(`standardwebhooks`), no redirects followed, 10 s at most, the answer's body never read.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

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
from calcgraph.domain.events.resolve import resolve_sync
from calcgraph.domain.events.service import event_service
from calcgraph.domain.webhooks.delivery.service import (
    DELIVER_ACTOR,
    Attempt,
    Outcome,
    Raced,
    due,
    fan_out,
    finish,
    prepare,
)
from calcgraph.workers.actor import ActorSpec
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sweeper import Timer

log = logging.getLogger("calcgraph.webhooks")
TIMEOUT_SECONDS = 10.0
_FAN_OUT_ROUNDS = 20


def post(attempt: Attempt, allow: AllowList, timeout: float = TIMEOUT_SECONDS) -> Outcome:
    """Send one attempt; the outcome (never raises for the receiver's faults)."""
    started = time.monotonic()
    attempted_at = utcnow()

    def outcome(status: int | None, error: str | None) -> Outcome:
        return Outcome(status, error, int((time.monotonic() - started) * 1000), attempted_at)

    try:
        destination = parse_url(attempt.url)
        addresses = resolve_sync(destination.host, destination.port)
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
    if destination.scheme == "https":
        extensions["sni_hostname"] = destination.host
    try:
        with (
            httpx.Client(follow_redirects=False, timeout=timeout, trust_env=False) as client,
            client.stream(
                "POST", url, content=payload, headers=headers, extensions=extensions
            ) as response,
        ):
            # The status line and headers are the answer; its body is never read.
            status = response.status_code
    except httpx.TimeoutException:
        return outcome(None, f"no answer within {timeout:g} s")
    except httpx.HTTPError as exc:
        return outcome(None, f"{type(exc).__name__}: {exc}"[:500])
    if 200 <= status < 300:
        return outcome(status, None)
    if 300 <= status < 400:
        return outcome(status, "redirects are not followed")
    return outcome(status, f"the receiver answered {status}")


def deliver(runtime: WorkerRuntime, delivery_id: str) -> None:
    settings = runtime.settings
    prepared = runtime.call(_prepare(runtime, delivery_id))
    if prepared is None:
        return
    if isinstance(prepared, str):
        result = Outcome(None, prepared, None, utcnow())
        runtime.call(_finish(runtime, delivery_id, result, final=True))
        return
    result = post(prepared, AllowList.parse(settings.webhook_allowed_hosts))
    state = runtime.call(_finish(runtime, delivery_id, result))
    log.info(
        "webhook delivery %s attempt %d: %s (%s)",
        delivery_id,
        prepared.attempt,
        state,
        result.status_code if result.status_code is not None else result.error,
    )


async def _prepare(runtime: WorkerRuntime, delivery_id: str) -> Attempt | str | None:
    async with runtime.database.read_session() as session:
        return await prepare(session, delivery_id)


async def _finish(
    runtime: WorkerRuntime, delivery_id: str, outcome: Outcome, *, final: bool = False
) -> str | None:
    async with runtime.database.write_session() as session:
        return await finish(
            session, delivery_id, outcome, runtime.settings.webhook_retry_schedule, final=final
        )


ACTORS = [ActorSpec(DELIVER_ACTOR, deliver, {"time_limit": 60_000, "max_retries": 0})]


class WebhookTimer(Timer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(
            runtime, "calcgraph-webhooks", runtime.settings.webhook_dispatch_interval_seconds
        )
        self._pruned_at = -math.inf

    def tick(self) -> Any:
        return self.runtime.call(self.round())

    async def round(self) -> int:
        """One round: fan out, send what is due, prune when it is time. Returns the
        attempts sent."""
        for _ in range(_FAN_OUT_ROUNDS):
            try:
                async with self.runtime.database.write_session() as session:
                    written = await fan_out(session, utcnow())
            except Raced:
                break
            if written == 0:
                break
        settings = self.runtime.settings
        async with self.runtime.database.write_session() as session:
            sent = await due(session, utcnow(), settings.webhook_delivery_lease_seconds)
        if time.monotonic() - self._pruned_at >= settings.event_prune_interval_seconds:
            async with self.runtime.database.write_session() as session:
                pruned = await event_service.prune(session, settings.event_retention_days)
            self._pruned_at = time.monotonic()
            if pruned:
                log.info(
                    "deleted %d events older than %g days", pruned, settings.event_retention_days
                )
        return len(sent)
