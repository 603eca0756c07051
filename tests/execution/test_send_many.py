"""A unit of work's messages go to Redis in one pipelined batch, off the event loop, and each
arrives as Dramatiq's own enqueue would have sent it."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Sequence

import dramatiq
import pytest
import redis

from calcgraph.domain.jobs.enqueue import Message, enqueue
from calcgraph.settings import Settings
from calcgraph.workers.broker import QUEUE, build_broker, send_many
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
