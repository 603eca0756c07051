"""Per-caller rate limits (contract section 2: 429 `RateLimited` with `Retry-After`).

A token bucket per caller: `burst` tokens, refilled at `per_minute`; the caller is the
authenticated user (its subject), else the client address (anonymous loopback callers are not
limited). It is kept as GCRA (the generic cell
rate algorithm, the token bucket as one timestamp per caller: the time its bucket is full again),
so one read and one write decide a request. `limits`, the maintained library, offers fixed and
moving windows and a sliding window counter but no token bucket, and a window cannot express a
sustained rate with its own burst; the algorithm is a dozen lines, in memory and in Redis.

In memory per process by default; with Redis, one Lua script per request keeps the bucket
shared by every API process, timed by the Redis server's clock so hosts need not agree.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.domain.errors import RateLimited
from calcgraph.ops.metrics import Metrics
from calcgraph.rest_compat.errors import render
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.ratelimit")
EXEMPT_PATHS = frozenset({"/health", "/metrics"})
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_MAX_KEYS = 100_000
_REDIS_DOWN_LOG_SECONDS = 60.0

# KEYS[1]: the caller's key; ARGV: seconds per token, burst tolerance in seconds.
# Answers "0" when the request may go, else the seconds to wait (a string: Lua numbers
# returned to Redis are truncated to integers).
_GCRA_LUA = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or t
if tat < t then tat = t end
local allow_at = tat - tolerance
if t < allow_at then return tostring(allow_at - t) end
local new_tat = tat + interval
-- At least 1 ms: with a tiny interval new_tat - t rounds to 0, which SET refuses.
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.max(1, math.ceil((new_tat - t) * 1000)))
return '0'
"""


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


class RedisLimiter:
    def __init__(self, url: str, per_minute: float, burst: int, prefix: str = "") -> None:
        self.per_minute, self.burst = per_minute, burst
        self.interval = 60.0 / per_minute
        self.tolerance = self.interval * (burst - 1)
        self.prefix = f"{prefix}calcgraph:ratelimit:"
        self._url = url
        self._client: Any = None
        self._script: Any = None
        self._last_warning = 0.0

    async def acquire(self, key: str) -> float:
        if self._client is None:
            # The asyncio client belongs to the event loop that first uses it: the API's loop.
            from calcgraph.ops.redis_clients import async_client

            self._client = async_client(self._url)
            self._script = self._client.register_script(_GCRA_LUA)
        try:
            answer = await self._script(
                keys=[self.prefix + key], args=[repr(self.interval), repr(self.tolerance)]
            )
        except Exception as exc:  # redis.RedisError, OSError: a limiter down must not stop the API
            now = time.monotonic()
            if now - self._last_warning > _REDIS_DOWN_LOG_SECONDS:
                self._last_warning = now
                log.warning("rate limiting is off while Redis does not answer: %s", exc)
            return 0.0
        return float(answer)

    async def close(self) -> None:
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
