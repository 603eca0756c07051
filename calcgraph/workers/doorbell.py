"""A Redis consumer that sleeps while there is nothing to do, and wakes when a message arrives.

Dramatiq's Redis consumer polls: a fetch (a Lua script) whenever its queue is empty, backing off
to its timeout. With a short timeout (for a short enqueue-to-start latency) an idle
`calcgraph worker` spent 0.29 of a core asking an empty queue every 5 ms. Here every sender
rings a doorbell (a PUBLISH on the namespace's channel, in the same round trip as the batch it
sends) and a consumer with room for more work waits for it in a blocking read of its own
subscription: a message starts at once, and an idle consumer makes one fetch per timeout (the
worker's, a second), which keeps its Redis heartbeat fresh and bounds how long a stop waits.

No ring is lost: a consumer subscribes before its first fetch, so a message sent after a
fetch found the queue empty has rung a bell that waits in the subscription's socket. A consumer
whose threads are all busy waits for one of them to acknowledge instead (an event, no poll).
A fetch that brought fewer messages than it asked for emptied the queue: the consumer then
waits for the next ring at once, instead of a second fetch (a Lua script, Redis's CPU and a
round trip) that would find the queue empty. A ring names its queue: the delay queue's consumer
sleeps through the rings of its queue and the queue's through the delay queue's (each woke the
other for a fetch that found nothing, one per send); and a fetch first takes the rings already
there, whose messages it serves (a burst of sends rang once each, and each ring after the
first woke the consumer for another empty fetch).
A delay-queue consumer holding retries polls at `poll_ms` until their eta, as Dramatiq does;
so does any consumer while its subscription is broken (Redis restarting), which it renews.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import _RedisConsumer
from dramatiq.common import dq_name, q_name
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message


class WakingConsumer(_RedisConsumer):
    def __init__(
        self,
        broker: Any,
        queue_name: str,
        prefetch: int,
        timeout: int,
        *,
        poll_ms: int,
        channel: str,
    ) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.poll_s = poll_ms / 1000
        self.idle_s = max(timeout, poll_ms) / 1000
        self.delays = queue_name == dq_name(queue_name)
        self._other = q_name(queue_name) if self.delays else dq_name(queue_name)
        """The queue whose rings are not this consumer's work."""
        self.channel = channel
        self._pubsub: Any = None
        self._acked = threading.Event()
        self._emptied = False
        """The last fetch brought fewer messages than it asked for: the queue was empty then,
        and a message sent since has rung."""

    def ack(self, message: Any) -> None:
        try:
            super().ack(message)  # type: ignore[no-untyped-call]
        finally:
            self._acked.set()

    def nack(self, message: Any) -> None:
        try:
            super().nack(message)  # type: ignore[no-untyped-call]
        finally:
            self._acked.set()

    def __next__(self) -> MessageProxy | None:
        import redis

        try:
            while self.message_cache:
                data = self.message_cache.pop(0)
                if data is None:
                    continue
                self.misses = 0
                message = Message.decode(data)
                self.queued_message_ids.add(message.message_id)
                return MessageProxy(message)
            self._acked.clear()  # before counting: an ack from now on ends the wait below
            room = self.prefetch - self.outstanding_message_count
            if room > 0:
                if self._emptied and self._pubsub is not None and not self.delays:
                    # Subscribed since that fetch: whatever came after it has rung. (A delay
                    # queue's consumer polls for its retries' eta instead.)
                    self._emptied = False
                    self._ring(self.idle_s)
                    return None
                # The rings already there: their messages are queued, this fetch serves them.
                subscribed = self._subscribe() and self._take_rings()
                self.message_cache = self.broker.do_fetch(self.queue_name, room)
                if self.message_cache:
                    self._emptied = len(self.message_cache) < room
                    return self.__next__()
                if self.delays and self.outstanding_message_count:
                    time.sleep(self.poll_s)  # retries held until their eta
                elif subscribed:
                    self._ring(self.idle_s)
                else:
                    time.sleep(self.poll_s)
            else:
                self._acked.wait(self.idle_s)
            return None
        except redis.ConnectionError as exc:
            self._close_pubsub()
            raise ConnectionClosed(exc) from None  # type: ignore[no-untyped-call]

    def _subscribe(self) -> bool:
        """Subscribed to the doorbell (again, after Redis restarted), or False for now."""
        import redis

        if self._pubsub is not None:
            return True
        pubsub = self.broker.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.channel)
        except (redis.RedisError, OSError):
            pubsub.close()
            return False
        self._pubsub = pubsub
        return True

    def _ring(self, timeout: float) -> None:
        """Wait up to `timeout` for a doorbell of this consumer's queue (the other queue's
        rings are let by), then take every other one already rung (the fetch that follows
        serves them all)."""
        import redis

        deadline = time.monotonic() + timeout
        try:
            while True:
                rung = self._pubsub.get_message(timeout=max(0.0, deadline - time.monotonic()))
                if rung is None:  # the wait is over (or a subscription's own message came)
                    return
                if self._mine(rung):
                    break
            self._take_rings()
        except (redis.RedisError, OSError):
            self._close_pubsub()  # renewed before the next fetch; meanwhile, polls

    def _take_rings(self) -> bool:
        """Take every doorbell already rung, without waiting; False when the subscription
        broke (it is renewed before the next fetch)."""
        import redis

        try:
            while self._pubsub.get_message(timeout=0) is not None:
                pass
        except (redis.RedisError, OSError):
            self._close_pubsub()
            return False
        return True

    def _mine(self, rung: dict[str, Any]) -> bool:
        """A ring for this consumer's queue (or one that names none: it wakes every consumer)."""
        data = rung.get("data")
        if isinstance(data, bytes):
            data = data.decode(errors="replace")
        return data != self._other

    def _close_pubsub(self) -> None:
        if self._pubsub is not None:
            try:
                self._pubsub.close()
            except Exception:  # a broken subscription closes as it can
                pass
            self._pubsub = None

    def close(self) -> None:
        self._close_pubsub()
        super().close()
