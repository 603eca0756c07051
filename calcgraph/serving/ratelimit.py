"""Per-caller rate limits (contract section 2: 429 `RateLimited` with `Retry-After`).

A token bucket per caller: `burst` tokens, refilled at `per_minute`; the caller is the
authenticated user (its subject), else the client address (anonymous loopback callers are not
limited). It is kept as GCRA (the generic cell
rate algorithm, the token bucket as one timestamp per caller: the time its bucket is full again),
so one read and one write decide a request. `limits`, the maintained library, offers fixed and
moving windows and a sliding window counter but no token bucket, and a window cannot express a
sustained rate with its own burst; the algorithm is a dozen lines, in memory and in Redis.

In memory per process by default; with Redis, still answered in memory per request, and
shared by every API process through Redis on a coarse interval (`RedisLimiter`): a script per
request cost 8 % of a busy event loop and, under load, Redis connections.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.domain.errors import RateLimited
from calcgraph.ops import tasks
from calcgraph.ops.metrics import Metrics
from calcgraph.ops.redis_clients import SERVER_TIME_LUA, DownWarning
from calcgraph.rest_compat.errors import render
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.ratelimit")
EXEMPT_PATHS = frozenset({"/health", "/metrics"})
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_MAX_KEYS = 100_000

SYNC_SECONDS = 1.0
"""How often a process tells Redis what its callers used, and learns what the others did."""
_RECENT_SECONDS = 10.0
"""A caller seen this lately is synced even when this process let nothing through since."""
_SYNC_KEYS = 1000
"""Callers per script call of a sync."""

# KEYS: the callers' keys; ARGV[1]: seconds per token, ARGV[1 + i]: tokens KEYS[i] used since
# the last sync. Adds them to each shared bucket and answers, per key, the seconds until it is
# full again (strings: Lua numbers returned to Redis are truncated to integers); timed by the
# Redis server's clock, so hosts need not agree.
_SYNC_LUA = (
    SERVER_TIME_LUA
    + """
local interval = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local tat = tonumber(redis.call('GET', key)) or t
  if tat < t then tat = t end
  tat = tat + tonumber(ARGV[i + 1]) * interval
  if tat > t then
    -- At least 1 ms: with a tiny interval tat - t rounds to 0, which SET refuses.
    redis.call('SET', key, tostring(tat), 'PX', math.max(1, math.ceil((tat - t) * 1000)))
  end
  out[i] = tostring(tat - t)
end
return out
"""
)


class Limiter(Protocol):
    per_minute: float
    burst: int

    async def acquire(self, key: str) -> float:
        """0 when the caller may go on, else the seconds until its next token."""
        ...

    async def close(self) -> None: ...


class MemoryLimiter:
    def __init__(self, per_minute: float, burst: int, max_keys: int = _MAX_KEYS) -> None:
        self.per_minute, self.burst = per_minute, burst
        self.interval = 60.0 / per_minute
        self.tolerance = self.interval * (burst - 1)
        self.max_keys = max_keys
        # Caller -> the time its bucket is full again; an entry in the past is a full bucket.
        self._full_at: dict[str, float] = {}

    async def acquire(self, key: str) -> float:
        # No await between the read and the write: one event loop decides atomically.
        now = time.monotonic()
        full_at = self._full_at.get(key, now)
        if full_at < now:
            full_at = now
        allow_at = full_at - self.tolerance
        if now < allow_at:
            return allow_at - now
        if len(self._full_at) >= self.max_keys and key not in self._full_at:
            self._prune(now)
        self._full_at[key] = full_at + self.interval
        return 0.0

    def _prune(self, now: float) -> None:
        kept = {k: v for k, v in self._full_at.items() if v > now}
        if len(kept) >= self.max_keys:  # a flood of distinct callers: forget the oldest half
            kept = dict(list(kept.items())[len(kept) // 2 :])
        self._full_at = kept

    async def close(self) -> None:
        pass


class RedisLimiter(MemoryLimiter):
    """Each request is answered by this process's own buckets (no Redis round trip); every
    `SYNC_SECONDS` one script call adds what this process let through to the shared buckets
    in Redis and brings its own up to what every process used. One process alone holds a
    caller exactly; a caller spread over N processes may get up to a burst from each within
    an interval before they sync, and is held by all of them after it. While Redis does not
    answer, each process keeps limiting on its own."""

    def __init__(
        self,
        url: str,
        per_minute: float,
        burst: int,
        prefix: str = "",
        sync_seconds: float = SYNC_SECONDS,
    ) -> None:
        super().__init__(per_minute, burst)
        self.prefix = f"{prefix}calcgraph:ratelimit:"
        self._url = url
        self._client: Any = None
        self._script: Any = None
        self._syncing = tasks.Every(sync_seconds, self.sync)
        self._used: dict[str, int] = {}  # tokens taken per caller since the last sync
        self._seen: dict[str, float] = {}  # caller -> when this process last let it through
        self._redis_down = DownWarning(
            log, "rate limits are per process while Redis does not answer: %s"
        )

    async def acquire(self, key: str) -> float:
        # The syncing task belongs to the event loop that first uses it: the API's loop.
        self._syncing.start()
        wait = await super().acquire(key)
        if wait == 0:
            self._used[key] = self._used.get(key, 0) + 1
        return wait

    async def sync(self) -> None:
        """Tell Redis what this process let through since the last sync and learn what the
        other processes did, for every caller seen lately."""
        now = time.monotonic()
        used, self._used = self._used, {}
        for key in used:
            self._seen[key] = now
        self._seen = {k: at for k, at in self._seen.items() if now - at <= _RECENT_SECONDS}
        keys = list(self._seen)
        if not keys:
            return
        if self._client is None:
            from calcgraph.ops.redis_clients import async_client

            self._client = async_client(self._url)
            self._script = self._client.register_script(_SYNC_LUA)
        try:
            for at in range(0, len(keys), _SYNC_KEYS):
                chunk = keys[at : at + _SYNC_KEYS]
                answers = await self._script(
                    keys=[self.prefix + key for key in chunk],
                    args=[repr(self.interval), *(used.get(key, 0) for key in chunk)],
                )
                self._learn(chunk, answers)
        except Exception as exc:  # redis.RedisError, OSError: each process limits on its own
            for key, count in used.items():  # told next time
                self._used[key] = self._used.get(key, 0) + count
            self._redis_down(exc)

    def _learn(self, keys: list[str], answers: list[Any]) -> None:
        now = time.monotonic()
        for key, ahead in zip(keys, answers, strict=True):
            # The shared bucket holds every process's use up to this sync; what this process
            # let through since (during the round trip) is added on top.
            shared = now + float(ahead) + self._used.get(key, 0) * self.interval
            if shared > self._full_at.get(key, now):
                self._full_at[key] = shared

    async def close(self) -> None:
        await self._syncing.stop()
        if self._used:
            with contextlib.suppress(Exception):
                await self.sync()
        if self._client is not None:
            await self._client.aclose()
            self._client = self._script = None


def build_limiter(settings: Settings) -> Limiter | None:
    if settings.rate_limit_per_minute <= 0:
        return None
    if settings.redis_url is not None:
        return RedisLimiter(
            settings.redis_url.get_secret_value(),
            settings.rate_limit_per_minute,
            settings.rate_limit_burst,
            settings.redis_key_prefix,
        )
    return MemoryLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)


async def _refusal(limiter: Limiter, metrics: Metrics, key: str, who: str) -> RateLimited | None:
    wait = await limiter.acquire(key)
    if wait <= 0:
        return None
    metrics.rate_limited.inc()
    retry_after = max(1, math.ceil(wait))
    return RateLimited(
        f"{who} is over the rate limit of {limiter.per_minute:g} requests per minute "
        f"(bursts of {limiter.burst}); retry after {retry_after} s",
        {"retry_after": retry_after},
    )


def refused_token_throttle(
    limiter: Limiter | None, metrics: Metrics
) -> Callable[[Scope], Awaitable[RateLimited | None]] | None:
    """For the authentication middleware: a request whose token is refused counts against
    its address, loopback included (an invalid token is no operator's tool), so guessing
    tokens or flooding the verifier is as limited as any other traffic."""
    if limiter is None:
        return None

    async def throttle(scope: Scope) -> RateLimited | None:
        client = scope.get("client")
        address = client[0] if client else "unknown"
        return await _refusal(limiter, metrics, f"ip:{address}", f"address {address}")

    return throttle


class RateLimitMiddleware:
    """After authentication (the user is known), before routing: REST and GraphQL alike."""

    def __init__(self, app: ASGIApp, limiter: Limiter | None, metrics: Metrics) -> None:
        self.app = app
        self.limiter = limiter
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limiter = self.limiter
        if limiter is None or scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        principal = scope.get("state", {}).get(PRINCIPAL_KEY)
        if principal is not None:
            key, who = f"user:{principal.subject}", f"user {principal.username}"
        else:
            client = scope.get("client")
            address = client[0] if client else "unknown"
            if address in LOOPBACK:
                # Anonymous calls from this host (the public type routes, the operator's own
                # tools and benchmarks) share one address: limiting them would limit everyone.
                await self.app(scope, receive, send)
                return
            key, who = f"ip:{address}", f"address {address}"
        error = await _refusal(limiter, self.metrics, key, who)
        if error is None:
            await self.app(scope, receive, send)
            return
        await render(error)(scope, receive, send)
