"""How many WebSockets are open (contract 8b, sockets): those not yet authenticated by client
address, the authenticated ones by user. `CALCGRAPH_LIMIT_PENDING_SOCKETS_PER_ADDRESS` and
`CALCGRAPH_LIMIT_SOCKETS_PER_USER` bound them across every serve process.

In memory on the embedded default (one process counts every socket). With Redis, shared by
every API process (`serve --workers N`, several hosts): each count is a sorted set of the open
sockets' ids scored by a lease's end (Redis's clock), so a process that dies without closing
its sockets stops counting them once their leases end (`LEASE_SECONDS`); each process renews
its own sockets' leases every third of it. One script call decides an arrival (expired leases
dropped, counted, added when there is room); a leave is one ZREM. While Redis does not answer,
each process counts on its own (and says so in its log), as the rate limits do.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from calcgraph.ops import tasks
from calcgraph.ops.redis_clients import SERVER_TIME_LUA, DownWarning
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.sockets")

LEASE_SECONDS = 60.0
"""A socket's count lasts this long unless its process renews it (every third of it)."""

# KEYS[1]: the count's sorted set; ARGV: the socket's id, the limit, the lease in seconds.
# 1 when the socket is counted, 0 when the count is at the limit already.
_ARRIVE_LUA = (
    SERVER_TIME_LUA
    + """
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], t + lease, ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(lease) + 1)
return 1
"""
)

# KEYS: counts; ARGV[1]: the lease, ARGV[1 + i]: the id of a socket counted in KEYS[i].
_RENEW_LUA = (
    SERVER_TIME_LUA
    + """
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', t + lease, ARGV[i + 1])
  redis.call('EXPIRE', key, math.ceil(lease) + 1)
end
return #KEYS
"""
)


@dataclass
class Seat:
    """One socket's place in the counts: pending under its address, then under its user."""

    address: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    user_id: str | None = None
    held: Literal["pending", "user"] | None = None


class SocketCensus(Protocol):
    async def arrive(self, seat: Seat) -> str | None:
        """Count a new socket as pending under its address; why not when one too many."""
        ...

    async def authenticate(self, seat: Seat, user_id: str) -> str | None:
        """Move a pending socket to its user; why not when the user has too many (then it is
        counted nowhere)."""
        ...

    async def leave(self, seat: Seat) -> None: ...

    async def close(self) -> None: ...


def _too_many_pending(limit: int) -> str:
    return f"QuotaExceeded: at most {limit} sockets not yet authenticated per client address"


def _too_many_for_user(limit: int) -> str:
    return f"QuotaExceeded: at most {limit} open sockets per user"


class MemoryCensus:
    """The counts of this process's sockets (the embedded default: one process)."""

    def __init__(self, *, per_user: int, pending_per_address: int) -> None:
        self.per_user = per_user
        self.pending_per_address = pending_per_address
        self.pending: Counter[str] = Counter()
        self.users: Counter[str] = Counter()

    async def arrive(self, seat: Seat) -> str | None:
        if self.pending[seat.address] >= self.pending_per_address:
            return _too_many_pending(self.pending_per_address)
        self.pending[seat.address] += 1
        seat.held = "pending"
        return None

    async def authenticate(self, seat: Seat, user_id: str) -> str | None:
        await self.leave(seat)
        if self.users[user_id] >= self.per_user:
            return _too_many_for_user(self.per_user)
        self.users[user_id] += 1
        seat.user_id, seat.held = user_id, "user"
        return None

    async def leave(self, seat: Seat) -> None:
        if seat.held == "user" and seat.user_id is not None:
            _uncount(self.users, seat.user_id)
        elif seat.held == "pending":
            _uncount(self.pending, seat.address)
        seat.held = None

    async def close(self) -> None:
        return None


def _uncount(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


class RedisCensus:
    """The counts of every API process's sockets, in Redis (see the module's text)."""

    def __init__(
        self,
        url: str,
        *,
        per_user: int,
        pending_per_address: int,
        prefix: str = "",
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.url = url
        self.per_user = per_user
        self.pending_per_address = pending_per_address
        self.prefix = f"{prefix}calcgraph:sockets:"
        self.lease = lease_seconds
        self.local = MemoryCensus(per_user=per_user, pending_per_address=pending_per_address)
        """This process's own counts: what it decides by while Redis does not answer."""
        self.open: dict[str, tuple[str, str]] = {}
        """Socket id -> (the count's key, the id) of this process's counted sockets."""
        self._client: Any = None
        self._arrive: Any = None
        self._renew: Any = None
        self._renewal = tasks.Every(lease_seconds / 3, self.renew)
        self._redis_down = DownWarning(
            log, "socket counts are per process while Redis does not answer: %s"
        )

    def _connect(self) -> None:
        if self._client is None:
            from calcgraph.ops.redis_clients import async_client

            self._client = async_client(self.url)
            self._arrive = self._client.register_script(_ARRIVE_LUA)
            self._renew = self._client.register_script(_RENEW_LUA)
        # The renewing task belongs to the event loop that first counts: the API's loop.
        self._renewal.start()

    async def _count(self, key: str, seat: Seat, limit: int) -> bool | None:
        """Whether Redis counted the socket under `key` (None: Redis did not answer)."""
        self._connect()
        try:
            counted = bool(await self._arrive(keys=[key], args=[seat.id, limit, self.lease]))
        except Exception as exc:  # redis.RedisError, OSError
            self._redis_down(exc)
            return None
        if counted:
            self.open[seat.id] = (key, seat.id)
        return counted

    async def arrive(self, seat: Seat) -> str | None:
        refused = await self.local.arrive(seat)
        if refused is not None:
            return refused
        key = f"{self.prefix}pending:{seat.address}"
        counted = await self._count(key, seat, self.pending_per_address)
        if counted is False:
            await self.local.leave(seat)
            return _too_many_pending(self.pending_per_address)
        return None

    async def authenticate(self, seat: Seat, user_id: str) -> str | None:
        await self._uncount(seat)
        refused = await self.local.authenticate(seat, user_id)
        if refused is not None:
            return refused
        counted = await self._count(f"{self.prefix}user:{user_id}", seat, self.per_user)
        if counted is False:
            await self.local.leave(seat)
            return _too_many_for_user(self.per_user)
        return None

    async def leave(self, seat: Seat) -> None:
        await self._uncount(seat)
        await self.local.leave(seat)

    async def _uncount(self, seat: Seat) -> None:
        counted = self.open.pop(seat.id, None)
        if counted is None or self._client is None:
            return
        try:
            await self._client.zrem(counted[0], counted[1])
        except Exception as exc:  # its lease ends it
            self._redis_down(exc)

    async def renew(self) -> None:
        """Extend the leases of this process's open sockets."""
        counted = list(self.open.values())
        try:
            for at in range(0, len(counted), 1000):
                chunk = counted[at : at + 1000]
                await self._renew(
                    keys=[key for key, _ in chunk], args=[self.lease, *(id for _, id in chunk)]
                )
        except Exception as exc:
            self._redis_down(exc)

    async def close(self) -> None:
        await self._renewal.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                for key, id in list(self.open.values()):
                    await self._client.zrem(key, id)
            self.open.clear()
            await self._client.aclose()
            self._client = None


def build_census(settings: Settings) -> SocketCensus:
    per_user = settings.limit_sockets_per_user
    pending = settings.limit_pending_sockets_per_address
    if settings.redis_url is not None:
        return RedisCensus(
            settings.redis_url.get_secret_value(),
            per_user=per_user,
            pending_per_address=pending,
            prefix=settings.redis_key_prefix,
        )
    return MemoryCensus(per_user=per_user, pending_per_address=pending)
