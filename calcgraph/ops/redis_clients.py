"""Every Redis client of calcgraph, built in one place with the same resilience.

After a Redis restart each pooled connection fails its next command; a client built here
retries a connection or timeout error on a fresh connection (with backoff), so a restart costs
a reconnect, not an error. While Redis is down the retries end in the error, which each caller
turns into what its contract says (a cache miss, a queued job the sweeper sends later, an open
rate limiter, `/health` saying `redis: unreachable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from typing import Any

SERVER_TIME_LUA = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
"""
"""The start of a Lua script timed by the Redis server's clock (so hosts need not agree): `t`,
the server's time in seconds."""

DOWN_LOG_SECONDS = 60.0


class DownWarning:
    """The warning a caller logs when Redis does not answer, at most once a `DOWN_LOG_SECONDS`:
    while Redis is down every call meets the error. `message` takes the call's arguments."""

    def __init__(self, logger: logging.Logger, message: str) -> None:
        self.logger = logger
        self.message = message
        self.last = 0.0

    def __call__(self, *args: object) -> None:
        now = time.monotonic()
        if now - self.last > DOWN_LOG_SECONDS:
            self.last = now
            self.logger.warning(self.message, *args)


_RETRIES = 3
_SOCKET_TIMEOUT = 5.0
_CONNECT_TIMEOUT = 2.0
_HEALTH_CHECK_SECONDS = 30


@functools.cache
def _driver_info() -> dict[str, Any]:
    """The library's name and version that each new connection sends (`CLIENT SETINFO`), found
    once: redis-py 7+ looks its own version up in the installed distributions for every new
    connection unless told (6-300 ms of the event loop each, seen in the soak of issue 27
    whenever a burst grew a pool). Older releases found it once, at import."""
    try:
        from redis.driver_info import DriverInfo
    except ImportError:
        return {}
    return {"driver_info": DriverInfo()}


def _options() -> dict[str, Any]:
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError, TimeoutError

    return {
        "socket_timeout": _SOCKET_TIMEOUT,
        "socket_connect_timeout": _CONNECT_TIMEOUT,
        "retry_on_error": [ConnectionError, TimeoutError, ConnectionResetError],
        "health_check_interval": _HEALTH_CHECK_SECONDS,
        "_backoff": ExponentialBackoff(cap=0.5, base=0.05),
        **_driver_info(),
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


class LoopClients:
    """One `async_client` per event loop that uses it (the API's, a worker runtime's): an
    asyncio client belongs to the loop it was made on. Clients of loops since closed are
    dropped when another loop first asks."""

    def __init__(self, url: str, **overrides: Any) -> None:
        self.url = url
        self._overrides = overrides
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}
        self._lock = threading.Lock()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                for closed in [lp for lp in self._clients if lp.is_closed()]:
                    del self._clients[closed]
                client = self._clients[loop] = async_client(self.url, **self._overrides)
            return client

    async def aclose(self) -> None:
        """Close the running loop's client (another loop's can only close on that loop) and
        forget them all."""
        with self._lock:
            clients, self._clients = self._clients, {}
        loop = asyncio.get_running_loop()
        for client_loop, client in clients.items():
            if client_loop is loop:
                with contextlib.suppress(Exception):
                    await client.aclose()
