"""The Dramatiq broker: Redis when `CALCGRAPH_REDIS_URL` is set, in-process otherwise.

Actors are declared per broker from the explicit registry in `calcgraph.workers` (each bound to
the process's `WorkerRuntime`), so an API process that only sends needs no actors at all:
messages are built by actor name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import CurrentMessage, Retries, ShutdownNotifications, TimeLimit

from calcgraph.domain.jobs.enqueue import Message

if TYPE_CHECKING:
    from calcgraph.settings import Settings
    from calcgraph.workers.runtime import WorkerRuntime

QUEUE = "calcgraph.jobs"
# Above the sandbox timeout: the sandbox kills user code first and the job records `timeout`;
# Dramatiq's own limit only stops a worker thread that hangs outside the sandbox.
TIME_LIMIT_MARGIN_MS = 60_000


@dataclass(frozen=True)
class ActorSpec:
    name: str
    fn: Callable[..., None]
    """Called as `fn(runtime, **kwargs)`."""
    options: dict[str, Any] = field(default_factory=dict)


def _time_limit_ms(settings: Settings) -> int:
    return int(settings.sandbox_timeout_seconds * 1000) + TIME_LIMIT_MARGIN_MS


def build_broker(settings: Settings) -> dramatiq.Broker:
    middleware = [
        TimeLimit(time_limit=_time_limit_ms(settings)),
        ShutdownNotifications(),
        # Bounded, quick retries; which failures are retried is each actor's `retry_when`.
        Retries(max_retries=settings.job_max_retries, min_backoff=100, max_backoff=5_000),
        CurrentMessage(),
    ]
    broker: dramatiq.Broker
    if settings.redis_url is not None:
        from dramatiq.brokers.redis import RedisBroker

        broker = RedisBroker(  # type: ignore[no-untyped-call]
            url=settings.redis_url.get_secret_value(),
            middleware=middleware,
            namespace=f"{settings.redis_key_prefix}calcgraph",
        )
    else:
        broker = StubBroker(middleware=middleware)
    broker.declare_queue(QUEUE)
    return broker


def send(broker: dramatiq.Broker, message: Message) -> None:
    """Send by actor name: the sender needs no actor objects (the API process has none)."""
    broker.enqueue(
        dramatiq.Message(
            queue_name=QUEUE,
            actor_name=message.actor,
            args=(),
            kwargs=dict(message.kwargs),
            options={},
        )
    )


def declare_actors(broker: dramatiq.Broker, runtime: WorkerRuntime) -> None:
    from calcgraph.workers.registry import ACTORS

    for spec in ACTORS:
        if spec.name in broker.actors:
            continue
        dramatiq.Actor(
            _bound(spec, runtime),
            broker=broker,
            actor_name=spec.name,
            queue_name=QUEUE,
            priority=0,
            # Every actor has a time limit; the sandbox's own timeout fires first.
            options={"time_limit": _time_limit_ms(runtime.settings), **spec.options},
        )


def _bound(spec: ActorSpec, runtime: WorkerRuntime) -> Callable[..., None]:
    @wraps(spec.fn)
    def actor(**kwargs: Any) -> None:
        spec.fn(runtime, **kwargs)

    return actor
