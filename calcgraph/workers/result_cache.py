"""The result cache: a function version's successful outputs for given SI inputs, kept one hour.

In-process (a dict shared by the API and the in-process workers) without Redis; in Redis (shared
by every API and worker host) with it. Only successes are stored; failures always run again.
The API reads asynchronously, workers write from their threads synchronously.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from calcgraph.domain.jobs.cache_key import RESULT_TTL_SECONDS, CachedResult
from calcgraph.ops.redis_clients import DownWarning

log = logging.getLogger("calcgraph.workers.result_cache")


@dataclass
class CacheStats:
    """What /metrics reports of this process's cache (the hit rate is the API's lookups)."""

    hits: int = 0
    misses: int = 0
    stores: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def looked_up(self, found: CachedResult | None) -> CachedResult | None:
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        return found

    def stored(self) -> None:
        with self._lock:
            self.stores += 1


class InProcessResultCache:
    def __init__(self, ttl_seconds: float = RESULT_TTL_SECONDS, max_entries: int = 10_000) -> None:
        self.stats = CacheStats()
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[float, CachedResult]] = OrderedDict()

    def lookup(self, key: str) -> CachedResult | None:
        return self.stats.looked_up(self._lookup(key))

    def _lookup(self, key: str) -> CachedResult | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found[0] < time.monotonic():
                del self._entries[key]
                return None
            return found[1]

    async def get(self, key: str) -> CachedResult | None:
        return self.lookup(key)

    async def get_many(self, keys: Sequence[str]) -> list[CachedResult | None]:
        return [self.lookup(key) for key in keys]

    def put(self, key: str, result: CachedResult) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic() + self.ttl, result)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        self.stats.stored()

    async def close(self) -> None:
        pass


class RedisResultCache:
    """Keys `<prefix>result:<sha256>` holding JSON, with Redis' own expiry."""

    def __init__(self, url: str, ttl_seconds: float = RESULT_TTL_SECONDS, prefix: str = "") -> None:
        from calcgraph.ops.redis_clients import sync_client

        self.stats = CacheStats()
        self.ttl_ms = int(ttl_seconds * 1000)
        self.prefix = f"{prefix}calcgraph:result:"
        self._sync = sync_client(url)
        self._url = url
        self._async: Any = None
        self._down = DownWarning(
            log, "the result cache is bypassed while Redis does not answer: %s"
        )

    def _client(self) -> Any:
        # The asyncio client belongs to the event loop that first uses it: the API's loop.
        if self._async is None:
            from calcgraph.ops.redis_clients import async_client

            self._async = async_client(self._url)
        return self._async

    async def get(self, key: str) -> CachedResult | None:
        # A cache that does not answer is a miss: the job runs (its result is the same).
        try:
            raw = await self._client().get(self.prefix + key)
        except Exception as exc:  # redis.RedisError, OSError
            self._down(exc)
            raw = None
        return self.stats.looked_up(_decode(raw))

    async def get_many(self, keys: Sequence[str]) -> list[CachedResult | None]:
        """One MGET: a tick submitting 1,000 jobs made 1,000 round trips, most of its time."""
        if not keys:
            return []
        try:
            raws = await self._client().mget([self.prefix + key for key in keys])
        except Exception as exc:  # redis.RedisError, OSError: every key is a miss
            self._down(exc)
            raws = [None] * len(keys)
        return [self.stats.looked_up(_decode(raw)) for raw in raws]

    async def ping(self) -> bool:
        """Whether Redis answers now (`/health`)."""
        try:
            return bool(await self._client().ping())
        except Exception:
            return False

    def lookup(self, key: str) -> CachedResult | None:
        try:
            raw = self._sync.get(self.prefix + key)
        except Exception as exc:  # redis.RedisError, OSError
            self._down(exc)
            raw = None
        return self.stats.looked_up(_decode(raw))

    def put(self, key: str, result: CachedResult) -> None:
        body = json.dumps({"outputs": result.outputs, "logs": result.logs})
        self._sync.set(self.prefix + key, body, px=self.ttl_ms)
        self.stats.stored()

    async def close(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None
        self._sync.close()


def _decode(raw: Any) -> CachedResult | None:
    if raw is None:
        return None
    data = json.loads(raw)
    return CachedResult(outputs=data["outputs"], logs=data.get("logs", ""))


ResultCache = InProcessResultCache | RedisResultCache
