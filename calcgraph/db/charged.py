"""JSON values decoded on a pooled connection, charged to whoever holds it (contract 8b):
asyncpg decodes a row's values as they arrive, in the event loop's read callback, outside the
steps of the request that asked for them (`calcgraph.db.engine.Database`'s `charged`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only


class Charged(Protocol):
    """What pays for the time a request's work takes (`domain.spend.Meter`)."""

    spent: float


class _Holder:
    """Who holds one pooled connection now: what its decoded JSON values are charged to."""

    __slots__ = ("charged",)

    def __init__(self) -> None:
        self.charged: Charged | None = None

    def decode(self, value: bytes) -> Any:
        started = time.thread_time()
        try:
            # The leading byte is the version of PostgreSQL's binary jsonb format.
            return json.loads(value[1:].decode())
        finally:
            charged = self.charged
            if charged is not None:
                charged.spent += time.thread_time() - started


def _encode_jsonb(text: str) -> bytes:
    return b"\x01" + text.encode()


_HOLDER = "calcgraph.holder"


def charge_decoding(engine: AsyncEngine, charged: Callable[[], Charged | None]) -> None:
    """asyncpg decodes a row's values as the rows arrive, in the event loop's read callback,
    outside the steps of the request that asked for them: an 8 MiB job output read whole
    cost its decoding to no one (serving.loop_share meters a request's own steps), and in the
    soak of issue 27 decoding the hostile users' big values was 9 % of the loop, unmetered.
    So each connection decodes JSONB with a codec of its own that charges the time to what
    `charged` gave in the context that checked the connection out (the request's meter), until
    it is checked in."""
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _connected(dbapi_connection: Any, record: Any) -> None:
        holder = _Holder()
        record.info[_HOLDER] = holder
        codec = dbapi_connection.driver_connection.set_type_codec(
            "jsonb",
            encoder=_encode_jsonb,
            decoder=holder.decode,
            schema="pg_catalog",
            format="binary",
        )
        await_only(codec)

    @event.listens_for(sync_engine, "checkout")
    def _taken(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        holder = record.info.get(_HOLDER)
        if holder is not None:
            holder.charged = charged()

    @event.listens_for(sync_engine, "checkin")
    def _returned(dbapi_connection: Any, record: Any) -> None:
        holder = record is not None and record.info.get(_HOLDER)
        if holder:
            holder.charged = None
