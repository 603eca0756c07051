"""Every Redis client of calcgraph, built in one place with the same resilience.

After a Redis restart each pooled connection fails its next command; a client built here
retries a connection or timeout error on a fresh connection (with backoff), so a restart costs
a reconnect, not an error. While Redis is down the retries end in the error, which each caller
turns into what its contract says (a cache miss, a queued job the sweeper sends later, an open
rate limiter, `/health` saying `redis: unreachable`).
"""

from __future__ import annotations

from typing import Any

_RETRIES = 3
_SOCKET_TIMEOUT = 5.0
_CONNECT_TIMEOUT = 2.0
_HEALTH_CHECK_SECONDS = 30


def _options() -> dict[str, Any]:
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError, TimeoutError

    return {
        "socket_timeout": _SOCKET_TIMEOUT,
        "socket_connect_timeout": _CONNECT_TIMEOUT,
        "retry_on_error": [ConnectionError, TimeoutError, ConnectionResetError],
        "health_check_interval": _HEALTH_CHECK_SECONDS,
        "_backoff": ExponentialBackoff(cap=0.5, base=0.05),
    }


def sync_client(url: str, **overrides: Any) -> Any:
    """A `redis.Redis` that survives a server restart."""
    import redis
    from redis.retry import Retry

    options = {**_options(), **overrides}
    options["retry"] = Retry(options.pop("_backoff"), _RETRIES)
    return redis.Redis.from_url(url, **options)


def async_client(url: str, **overrides: Any) -> Any:
    """A `redis.asyncio.Redis` that survives a server restart (bound to the loop using it)."""
    import redis.asyncio
    from redis.asyncio.retry import Retry

    options = {**_options(), **overrides}
    options["retry"] = Retry(options.pop("_backoff"), _RETRIES)
    return redis.asyncio.Redis.from_url(url, **options)
