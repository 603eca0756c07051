"""A unit of work's messages go to Redis in one batch (one transaction), off the event loop,
and each arrives as Dramatiq's own enqueue would have sent it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence

import dramatiq
import pytest
import redis

from calcgraph.domain.jobs.enqueue import Message, enqueue, job_message_id
from calcgraph.settings import Settings
from calcgraph.workers.broker import QUEUE, build_broker, send, send_many, waiting
from calcgraph.workers.flush import Outbox

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")


@pytest.fixture
def redis_broker() -> Iterator[dramatiq.Broker]:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    broker = build_broker(Settings(redis_url=REDIS_URL, redis_key_prefix=prefix))
    yield broker
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    broker.close()


def _received(broker: dramatiq.Broker, count: int) -> list[dramatiq.Message[object]]:
    consumer = broker.consume(QUEUE, prefetch=count + 1, timeout=200)
    got: list[dramatiq.Message[object]] = []
    for message in consumer:
        if message is None:
            break
        got.append(message)
        consumer.ack(message)
        if len(got) == count:
            break
    consumer.close()
    return got


def test_a_batch_arrives_whole_and_in_order(redis_broker: dramatiq.Broker) -> None:
    messages = [Message("jobs.run", {"job_id": f"job-{i}"}) for i in range(50)]
    assert send_many(redis_broker, messages) == 0
    got = _received(redis_broker, 50)
    assert [m.kwargs["job_id"] for m in got] == [f"job-{i}" for i in range(50)]
    assert {m.actor_name for m in got} == {"jobs.run"}


def test_a_batch_is_stored_as_one_enqueue_at_a_time_would_store_it(
    redis_broker: dramatiq.Broker,
) -> None:
    """Same hash fields (our derived ids), same message bodies but for the send time, same
    queue order: consumers and the sweeper's `waiting` cannot tell the batch from Dramatiq's
    own enqueue."""
    ids = [job_message_id(str(uuid.uuid4()), 1) for _ in range(4)]
    one_by_one = [Message("jobs.run", {"job_id": f"one-{i}"}, ids[i]) for i in (0, 1)]
    batched = [Message("chains.run", {"job_id": f"batch-{i}"}, ids[i]) for i in (2, 3)]
    for message in one_by_one:
        send(redis_broker, message)
    assert send_many(redis_broker, batched) == 0
    client = redis_broker.client  # type: ignore[attr-defined]
    queue = f"{redis_broker.namespace}:{QUEUE}"  # type: ignore[attr-defined]
    order = [raw.decode() for raw in client.lrange(queue, 0, -1)]
    assert order == [f"{message_id}.0" for message_id in ids]
    stored = {k.decode(): json.loads(v) for k, v in client.hgetall(f"{queue}.msgs").items()}
    bodies = [stored[f"{message_id}.0"] for message_id in ids]
    for body in bodies:
        assert isinstance(body.pop("message_timestamp"), int)
    assert [body["message_id"] for body in bodies] == ids
    assert bodies[3] == {
        **bodies[1],
        "actor_name": "chains.run",
        "kwargs": {"job_id": "batch-3"},
        "message_id": ids[3],
        "options": {"redis_message_id": f"{ids[3]}.0"},
    }
    assert waiting(redis_broker, ids) == set(ids)
    got = _received(redis_broker, 4)
    assert [m.message_id for m in got] == ids
    assert [m.kwargs["job_id"] for m in got] == ["one-0", "one-1", "batch-2", "batch-3"]


def test_a_batch_stores_the_bytes_dramatiq_would_encode(redis_broker: dramatiq.Broker) -> None:
    """Byte for byte (but for the send time): the batch encodes without building a Dramatiq
    message for each, when no middleware hooks the enqueue."""
    message_id, other = (job_message_id(str(uuid.uuid4()), 1) for _ in range(2))
    messages = [Message("jobs.run", {"job_id": "jöb"}, message_id), Message("jobs.run", {}, other)]
    assert send_many(redis_broker, messages) == 0
    client = redis_broker.client  # type: ignore[attr-defined]
    queue = f"{redis_broker.namespace}:{QUEUE}"  # type: ignore[attr-defined]
    raw = client.hget(f"{queue}.msgs", f"{message_id}.0")
    expected = dramatiq.Message(
        queue_name=QUEUE,
        actor_name="jobs.run",
        args=(),
        kwargs={"job_id": "jöb"},
        options={"redis_message_id": f"{message_id}.0"},
        message_id=message_id,
        message_timestamp=json.loads(raw)["message_timestamp"],
    )
    assert raw == expected.encode()


def test_a_middleware_that_hooks_the_enqueue_sees_each_message_of_a_batch(
    redis_broker: dramatiq.Broker,
) -> None:
    seen: list[tuple[str, str]] = []

    class Hook(dramatiq.Middleware):
        def before_enqueue(self, broker: object, message: object, delay: object) -> None:
            seen.append(("before", message.kwargs["job_id"]))  # type: ignore[attr-defined]

        def after_enqueue(self, broker: object, message: object, delay: object) -> None:
            seen.append(("after", message.kwargs["job_id"]))  # type: ignore[attr-defined]

    redis_broker.add_middleware(Hook())
    assert send_many(redis_broker, [Message("jobs.run", {"job_id": f"j{i}"}) for i in (0, 1)]) == 0
    assert seen == [("before", "j0"), ("after", "j0"), ("before", "j1"), ("after", "j1")]
    assert [m.kwargs["job_id"] for m in _received(redis_broker, 2)] == ["j0", "j1"]


def test_job_message_ids_are_uuid5_of_the_job_and_delivery() -> None:
    for delivery in (1, 2, 17):
        job_id = str(uuid.uuid4())
        expected = uuid.uuid5(
            uuid.UUID("6f1c2a52-3f7e-4f43-9d4e-0c2b1f5d7a10"), f"{job_id}:{delivery}"
        )
        assert job_message_id(job_id, delivery) == str(expected)


def test_a_failed_batch_is_counted_not_raised(redis_broker: dramatiq.Broker) -> None:
    redis_broker.client.connection_pool.connection_kwargs["port"] = 1  # type: ignore[attr-defined]
    redis_broker.client.connection_pool.disconnect()  # type: ignore[attr-defined]
    messages = [Message("jobs.run", {"job_id": f"job-{i}"}) for i in range(3)]
    assert send_many(redis_broker, messages) == 3


async def test_the_outbox_sends_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def send_all(batch: object) -> int:
        threads.append(threading.get_ident())
        return 0

    outbox = Outbox(lambda message: None, send_all, off_loop=True)
    state = outbox.begin()
    enqueue("jobs.run", job_id="a")
    enqueue("jobs.run", job_id="b")
    await outbox.committed(state)
    outbox.end(state)
    assert len(threads) == 1
    assert threads[0] != loop_thread


async def test_a_detached_send_does_not_hold_up_the_unit_of_work() -> None:
    release = threading.Event()
    sent: list[int] = []

    def slow(batch: Sequence[Message]) -> int:
        release.wait(5)
        sent.append(len(batch))
        return 0

    outbox = Outbox(lambda message: None, slow, off_loop=True, detach=True)
    state = outbox.begin()
    enqueue("jobs.run", job_id="a")
    await outbox.committed(state)  # returns while the send waits
    outbox.end(state)
    assert sent == []
    release.set()
    await outbox.drain()
    assert sent == [1]


async def test_a_stalled_redis_holds_up_neither_the_unit_of_work_nor_the_event_loop() -> None:
    """A Redis that takes the connection and never answers (the API's outbox as `serve` runs
    it with Redis: off the loop, detached): the unit of work is over at once, the event loop
    serves other work while the send waits on the socket, and the send gives up when the
    connection goes (its messages wait for the sweeper) without an exception."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    broker = build_broker(
        Settings(redis_url=f"redis://127.0.0.1:{port}/0", redis_key_prefix="stalled:")
    )
    unsent: list[int] = []

    def send_all(messages: Sequence[Message]) -> int:
        unsent.append(send_many(broker, messages))
        return unsent[-1]

    outbox = Outbox(lambda message: send(broker, message), send_all, off_loop=True, detach=True)
    state = outbox.begin()
    for i in range(1000):
        enqueue("jobs.run", job_id=f"job-{i}")
    await outbox.committed(state)  # the unit of work's end: the send has not even connected
    outbox.end(state)
    # Meanwhile the loop runs this test: it takes the send's connection and reads its batch.
    connection, _ = await asyncio.to_thread(listener.accept)
    first = await asyncio.to_thread(connection.recv, 65536)
    assert first  # the batch (or the client's first command) is on the wire, unanswered
    assert outbox._sending, "the send finished without an answer from Redis"
    listener.close()
    connection.close()  # Redis goes away: the send fails, off the loop
    await asyncio.wait_for(outbox.drain(), 30)
    assert unsent == [1000]
    broker.close()


async def test_the_api_sends_on_its_event_loop_and_rings_the_doorbell(
    redis_broker: dramatiq.Broker,
) -> None:
    """`serve` with Redis: the outbox's detached send goes through an asyncio client on the
    event loop (no thread), stores the batch as the blocking send does, and rings the
    doorbell idle consumers wait on."""
    from calcgraph.workers.broker import AsyncSender, doorbell_channel

    namespace = redis_broker.namespace  # type: ignore[attr-defined]
    listener = redis.Redis.from_url(REDIS_URL).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(doorbell_channel(namespace))
    sender = AsyncSender(redis_broker, REDIS_URL)
    threads: list[int] = []

    def blocking(batch: Sequence[Message]) -> int:
        threads.append(threading.get_ident())
        return 0

    outbox = Outbox(
        lambda m: None, blocking, off_loop=True, detach=True, send_async=sender.send_many
    )
    try:
        state = outbox.begin()
        for i in range(20):
            enqueue("jobs.run", job_id=f"job-{i}")
        await outbox.committed(state)
        outbox.end(state)
        await outbox.drain()
        assert threads == []  # the blocking sender was not used
        got = _received(redis_broker, 20)
        assert [m.kwargs["job_id"] for m in got] == [f"job-{i}" for i in range(20)]
        rung = None
        for _ in range(50):
            rung = listener.get_message(timeout=0.1)
            if rung is not None:
                break
        assert rung is not None
        assert rung["data"] == QUEUE.encode()
    finally:
        await sender.close()
        listener.close()


async def test_an_unreachable_redis_is_counted_by_the_async_sender(
    redis_broker: dramatiq.Broker,
) -> None:
    from calcgraph.workers.broker import AsyncSender

    sender = AsyncSender(redis_broker, "redis://127.0.0.1:1/0")
    try:
        messages = [Message("jobs.run", {"job_id": f"job-{i}"}) for i in range(3)]
        assert await sender.send_many(messages) == 3
    finally:
        await sender.close()


def _counted_fetches(broker: dramatiq.Broker) -> list[tuple[str, int]]:
    """(queue, room) of each fetch the broker's consumers make from now on."""
    fetches: list[tuple[str, int]] = []
    fetch = broker.do_fetch  # type: ignore[attr-defined]

    def counted(queue_name: str, room: int) -> list[bytes]:
        fetches.append((queue_name, room))
        found: list[bytes] = fetch(queue_name, room)
        return found

    broker.do_fetch = counted  # type: ignore[attr-defined]
    return fetches


def test_a_consumer_that_emptied_the_queue_waits_for_the_doorbell_without_fetching(
    redis_broker: dramatiq.Broker,
) -> None:
    """A fetch that brought fewer messages than it asked for emptied the queue: the consumer
    waits for the next ring rather than fetching again (one Lua script call a job, in Redis
    and in the worker), and a message sent afterwards still arrives at once."""
    fetches = _counted_fetches(redis_broker)
    consumer = redis_broker.consume(QUEUE, prefetch=4, timeout=300)
    try:
        assert send_many(redis_broker, [Message("jobs.run", {"job_id": "job-1"})]) == 0
        first = next(consumer)
        assert first is not None
        assert first.kwargs["job_id"] == "job-1"
        assert fetches == [(QUEUE, 4)]
        # Nothing rang since: no fetch, a wait for the doorbell (up to the timeout).
        assert next(consumer) is None
        assert fetches == [(QUEUE, 4)]
        consumer.ack(first)
        assert send_many(redis_broker, [Message("jobs.run", {"job_id": "job-2"})]) == 0
        later = None
        for _ in range(5):
            later = next(consumer)
            if later is not None:
                break
        assert later is not None
        assert later.kwargs["job_id"] == "job-2"
        assert len(fetches) == 2  # the ring woke the consumer, whose next fetch found it
    finally:
        consumer.close()


def test_a_ring_for_the_queue_does_not_wake_the_delay_queues_consumer(
    redis_broker: dramatiq.Broker,
) -> None:
    """A ring names its queue: the delay queue's consumer sleeps through the rings of the
    queue (each woke it for a fetch that found nothing), to the end of its wait."""
    from dramatiq.common import dq_name

    fetches = _counted_fetches(redis_broker)
    delays = redis_broker.consume(dq_name(QUEUE), prefetch=4, timeout=600)
    try:
        assert next(delays) is None  # subscribed, fetched nothing, waited for a ring
        assert fetches == [(dq_name(QUEUE), 4)]
        ringing = threading.Timer(
            0.1, lambda: send_many(redis_broker, [Message("jobs.run", {"job_id": "job-1"})])
        )
        ringing.start()
        began = time.monotonic()
        assert next(delays) is None
        ringing.join()
        # Its fetch, then a wait to its end (0.6 s): the queue's ring at 0.1 s let by.
        assert fetches == [(dq_name(QUEUE), 4)] * 2
        assert time.monotonic() - began >= 0.5
    finally:
        delays.close()
