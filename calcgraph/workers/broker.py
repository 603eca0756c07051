"""The Dramatiq broker: Redis when `CALCGRAPH_REDIS_URL` is set, in-process otherwise.

Actors are declared on a worker process's broker by its assembly (`calcgraph.workers.assembly`,
from the registry in `calcgraph.workers.registry`), so an API process that only sends needs no
actors at all: messages are built by actor name.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name
from dramatiq.encoder import JSONEncoder
from dramatiq.middleware import (
    CurrentMessage,
    Middleware,
    Retries,
    ShutdownNotifications,
    TimeLimit,
)

from calcgraph.domain.jobs.enqueue import Message
from calcgraph.workers.flush import send_each

if TYPE_CHECKING:
    from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.workers.broker")
QUEUE = "calcgraph.jobs"
# Above the sandbox timeout: the sandbox kills user code first and the job records `timeout`;
# Dramatiq's own limit only stops a worker thread that hangs outside the sandbox.
TIME_LIMIT_MARGIN_MS = 60_000


def time_limit_ms(settings: Settings) -> int:
    return int(settings.sandbox_timeout_seconds * 1000) + TIME_LIMIT_MARGIN_MS


def build_broker(settings: Settings) -> dramatiq.Broker:
    middleware = [
        TimeLimit(time_limit=time_limit_ms(settings)),
        ShutdownNotifications(),
        # Bounded, quick retries; which failures are retried is each actor's `retry_when`.
        Retries(max_retries=settings.job_max_retries, min_backoff=100, max_backoff=5_000),
        CurrentMessage(),
    ]
    broker: dramatiq.Broker
    if settings.redis_url is not None:
        from calcgraph.ops.redis_clients import sync_client

        # Our client: it reconnects and retries once Redis is back after a restart, where
        # the pooled connections of a plain one fail the first command each.
        redis_broker = _redis_broker_class()(
            client=sync_client(settings.redis_url.get_secret_value()),
            middleware=middleware,
            namespace=f"{settings.redis_key_prefix}calcgraph",
        )
        redis_broker.poll_ms = settings.worker_poll_ms
        broker = redis_broker
    else:
        # In one process the broker can count its own messages (see `waiting`).
        middleware.append(Outstanding())
        broker = StubBroker(middleware=middleware)
    broker.declare_queue(QUEUE)
    return broker


def _message(message: Message) -> dramatiq.Message[Any]:
    built: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=QUEUE, actor_name=message.actor, args=(), kwargs=dict(message.kwargs), options={}
    )
    if message.message_id is not None:
        built = built.copy(message_id=message.message_id)
    return built


def send(broker: dramatiq.Broker, message: Message) -> None:
    """Send by actor name: the sender needs no actor objects (the API process has none)."""
    broker.enqueue(_message(message))


_BATCH = 500
"""Messages per HSET/RPUSH command of a batch: commands of a few hundred KB at most."""


def send_many(broker: dramatiq.Broker, messages: Sequence[Message]) -> int:
    """Send a unit of work's messages. To Redis in one transaction of two commands per 500
    messages (the queue's message hash and its list) instead of Dramatiq's dispatch script
    once per message: a tick that submits 1,000 jobs paid 1,000 script calls, ~95 ms of this
    process's CPU and as much of Redis's, where this takes ~17 ms. Blocking: callers on an event
    loop run it in a thread. Returns how many could not be sent (logged; the sweeper re-sends
    their queued rows)."""
    if len(messages) > 1 and _is_redis(broker):
        return _send_batch(broker, messages)
    return send_each(partial(send, broker), messages)


def _hooks(broker: dramatiq.Broker, name: str) -> list[Callable[..., None]]:
    """The middleware's `name` hooks that do something (the base class's are no-ops)."""
    return [
        getattr(m, name)
        for m in broker.middleware
        if getattr(type(m), name, None) is not getattr(Middleware, name)
    ]


def _is_redis(broker: dramatiq.Broker) -> bool:
    # Only once its module is loaded can a broker be Dramatiq's Redis one: importing it (and
    # redis) to ask cost an in-process platform's first batch 50 ms of CPU, mid-run.
    module = sys.modules.get("dramatiq.brokers.redis")
    return module is not None and isinstance(broker, module.RedisBroker)


def _send_batch(broker: Any, messages: Sequence[Message]) -> int:
    """What Dramatiq's dispatch script does to enqueue (HSET the message under its id into
    `<queue>.msgs`, RPUSH the id onto `<queue>`), for the whole batch in MULTI/EXEC: every
    message arrives or none does, as with one script call each. Each message is built and
    encoded as Dramatiq's `enqueue` would (our broker's derived id, the enqueue hooks); what
    the script does besides (a heartbeat for the sender as if it were a worker, and now and
    then the queue's maintenance, which every consuming worker's fetch does too) is for
    consumers."""
    try:
        pipeline = broker.client.pipeline(transaction=True)
        _queue_batch(pipeline, broker, messages)
        pipeline.execute()
    except Exception:
        log.exception("could not send %d messages; the sweeper will re-send them", len(messages))
        return len(messages)
    return 0


def _queue_batch(pipeline: Any, broker: Any, messages: Sequence[Message]) -> None:
    """The commands of `_send_batch`, on a (sync or asyncio) Redis pipeline, and the doorbell
    that wakes idle consumers (calcgraph.workers.doorbell)."""
    queue = f"{broker.namespace}:{QUEUE}"
    before, after = _hooks(broker, "before_enqueue"), _hooks(broker, "after_enqueue")
    if before or after or type(dramatiq.get_encoder()) is not JSONEncoder:
        encoded = _built(broker, messages, before, after)
    else:
        encoded = _encoded(messages)
    ids = list(encoded)
    for at in range(0, len(ids), _BATCH):
        chunk = ids[at : at + _BATCH]
        pipeline.hset(f"{queue}.msgs", mapping={i: encoded[i] for i in chunk})
        pipeline.rpush(queue, *chunk)
    pipeline.publish(doorbell_channel(broker.namespace), QUEUE)


class AsyncSender:
    """The API process's sends to Redis, on its event loop: `_send_batch`'s commands through
    an asyncio client (bound to the loop that first sends), no thread and no blocking client.
    Returns how many could not be sent (logged; the sweeper re-sends their queued rows)."""

    def __init__(self, broker: dramatiq.Broker, url: str) -> None:
        self.broker = broker
        self.url = url
        self._client: Any = None

    async def send_many(self, messages: Sequence[Message]) -> int:
        if self._client is None:
            from calcgraph.ops.redis_clients import async_client

            self._client = async_client(self.url)
        try:
            pipeline = self._client.pipeline(transaction=True)
            _queue_batch(pipeline, self.broker, messages)
            await pipeline.execute()
        except Exception:
            log.exception(
                "could not send %d messages; the sweeper will re-send them", len(messages)
            )
            return len(messages)
        return 0

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _built(
    broker: Any,
    messages: Sequence[Message],
    before: list[Callable[..., None]],
    after: list[Callable[..., None]],
) -> dict[str, bytes]:
    """Redis message id -> each message built and encoded as Dramatiq's `enqueue` would,
    its enqueue hooks called."""
    encoded: dict[str, bytes] = {}
    for message in messages:
        message_id = message.message_id or dramatiq.message.generate_unique_id()
        redis_id = _redis_id(message_id, 0)
        built: dramatiq.Message[Any] = dramatiq.Message(
            queue_name=QUEUE,
            actor_name=message.actor,
            args=(),
            kwargs=dict(message.kwargs),
            options={"redis_message_id": redis_id},
            message_id=message_id,
        )
        for hook in before:
            hook(broker, built, None)
        encoded[redis_id] = built.encode()
        for hook in after:
            hook(broker, built, None)
    return encoded


_JSON = json.JSONEncoder(separators=(",", ":"))
"""What Dramatiq's JSONEncoder's `json.dumps(data, separators=(",", ":"))` builds per call."""


def _encoded(messages: Sequence[Message]) -> dict[str, bytes]:
    """Redis message id -> the bytes `dramatiq.Message(...).encode()` makes of each message,
    when no middleware hooks the enqueue and the encoder is Dramatiq's JSON one: the message's
    fields in their order, without building a Message, `asdict` and an encoder each (a tick
    that submits 1,000 jobs spent ~10 ms there, in the thread that competes with its answer)."""
    encoded: dict[str, bytes] = {}
    for message in messages:
        message_id = message.message_id or dramatiq.message.generate_unique_id()
        redis_id = _redis_id(message_id, 0)
        encoded[redis_id] = _JSON.encode(
            {
                "queue_name": QUEUE,
                "actor_name": message.actor,
                "args": [],
                "kwargs": dict(message.kwargs),
                "options": {"redis_message_id": redis_id},
                "message_id": message_id,
                "message_timestamp": int(time.time() * 1000),
            }
        ).encode("utf-8")
    return encoded


class Outstanding(Middleware):
    """The in-process broker's messages not yet acknowledged, by id: sent (a retry's included)
    and not yet acked or rejected. A count, as a delayed message is sent twice (to the delay
    queue, then to its queue) and acknowledged twice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def after_enqueue(self, broker: dramatiq.Broker, message: Any, delay: int | None) -> None:
        with self._lock:
            self.counts[message.message_id] += 1

    def _done(self, message: Any) -> None:
        with self._lock:
            self.counts[message.message_id] -= 1
            if self.counts[message.message_id] <= 0:
                del self.counts[message.message_id]

    def after_ack(self, broker: dramatiq.Broker, message: Any) -> None:
        self._done(message)

    def after_nack(self, broker: dramatiq.Broker, message: Any) -> None:
        self._done(message)

    def held(self, message_ids: Collection[str]) -> set[str]:
        with self._lock:
            return {m for m in message_ids if m in self.counts}


def doorbell_channel(namespace: str) -> str:
    """Where a sender rings the Redis consumers of `namespace` (calcgraph.workers.doorbell)."""
    return f"{namespace}:doorbell"


def _redis_id(message_id: str, retries: int) -> str:
    return f"{message_id}.{retries}"


def _redis_broker_class() -> Any:
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.common import current_millis

    from calcgraph.workers.doorbell import WakingConsumer

    class JobRedisBroker(RedisBroker):
        """Dramatiq's Redis broker, storing a message under an id derived from its message id
        and retry count instead of a random one: the sweeper can then ask whether a job's
        message still waits (`waiting`). Still unique per enqueue: a retry is enqueued with
        one more retry, and a delayed message is moved between queues whose hashes differ.
        Its consumers sleep until a sender rings (`calcgraph.workers.doorbell`)."""

        poll_ms = 5

        def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
            return WakingConsumer(
                self,
                queue_name,
                prefetch,
                timeout,
                poll_ms=self.poll_ms,
                channel=doorbell_channel(self.namespace),
            )

        def enqueue(self, message: Any, *, delay: int | None = None) -> Any:
            queue_name = message.queue_name
            retries = int(message.options.get("retries", 0))
            message = message.copy(
                options={"redis_message_id": _redis_id(message.message_id, retries)}
            )
            if delay is not None:
                queue_name = dq_name(queue_name)
                message = message.copy(
                    queue_name=queue_name, options={"eta": current_millis() + delay}
                )
            self.emit_before("enqueue", message, delay)
            self.do_enqueue(queue_name, message.options["redis_message_id"], message.encode())
            self.client.publish(doorbell_channel(self.namespace), queue_name)
            self.emit_after("enqueue", message, delay)
            return message

    return JobRedisBroker


def waiting(
    broker: dramatiq.Broker, message_ids: Collection[str], max_retries: int = 0
) -> set[str] | None:
    """Which of `message_ids` the broker still holds: queued, delayed for a retry, or fetched
    by a worker and not yet acknowledged. None when the broker cannot say (Redis is down)."""
    ids = list(message_ids)
    if not ids:
        return set()
    for middleware in broker.middleware:
        if isinstance(middleware, Outstanding):
            return middleware.held(ids)
    namespace = getattr(broker, "namespace", None)
    client = getattr(broker, "client", None)
    if namespace is None or client is None:
        return None
    # The Redis broker keeps a message in `<queue>.msgs` from its enqueue to its ack, under
    # `_redis_id` (a retry, delayed first, under its retry count).
    keys = [f"{namespace}:{QUEUE}.msgs", f"{namespace}:{dq_name(QUEUE)}.msgs"]
    fields = [
        [_redis_id(message_id, retries) for retries in range(max_retries + 1)] for message_id in ids
    ]
    try:
        pipe = client.pipeline(transaction=False)
        for key in keys:
            for names in fields:
                pipe.hmget(key, names)
        answers = pipe.execute()
    except Exception as exc:  # redis.RedisError, OSError: nothing is re-sent this round
        log.warning("cannot ask the broker which messages wait: %s", exc)
        return None
    found = answers[: len(ids)], answers[len(ids) :]
    return {
        message_id
        for index, message_id in enumerate(ids)
        if any(v is not None for half in found for v in half[index])
    }
