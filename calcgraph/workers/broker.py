"""The Dramatiq broker: Redis when `CALCGRAPH_REDIS_URL` is set, in-process otherwise.

Actors are declared per broker from the explicit registry in `calcgraph.workers` (each bound to
the process's `WorkerRuntime`), so an API process that only sends needs no actors at all:
messages are built by actor name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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

log = logging.getLogger("calcgraph.workers.broker")

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


def _message(message: Message) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name=QUEUE, actor_name=message.actor, args=(), kwargs=dict(message.kwargs), options={}
    )


def send(broker: dramatiq.Broker, message: Message) -> None:
    """Send by actor name: the sender needs no actor objects (the API process has none)."""
    broker.enqueue(_message(message))


def send_many(broker: dramatiq.Broker, messages: Sequence[Message]) -> int:
    """Send a unit of work's messages; to Redis in one pipelined round trip (a tick that
    submits 1,000 jobs paid 1,000 round trips, ~0.4 ms each). Blocking: callers on an event
    loop run it in a thread. Returns how many could not be sent (logged; the sweeper
    re-sends their queued rows)."""
    from dramatiq.brokers.redis import RedisBroker

    if not isinstance(broker, RedisBroker) or len(messages) == 1:
        failed = 0
        for message in messages:
            try:
                send(broker, message)
            except Exception:
                log.exception("could not send %s; the sweeper will re-send it", message.actor)
                failed += 1
        return failed
    pipeline = broker.client.pipeline(transaction=False)
    batch = _Pipelined(broker, pipeline)
    for message in messages:
        # Dramatiq's own enqueue (message ids, middleware), with its script bound to the
        # pipeline. Its "after enqueue" hooks run before the pipeline does; none of ours acts.
        RedisBroker.enqueue(batch, _message(message))  # type: ignore[arg-type]
    try:
        results = pipeline.execute(raise_on_error=False)
    except Exception:
        log.exception("could not send %d messages; the sweeper will re-send them", len(messages))
        return len(messages)
    failed = sum(isinstance(r, Exception) for r in results)
    if failed:
        log.error(
            "could not send %d of %d messages; the sweeper will re-send them", failed, len(messages)
        )
    return failed


class _Pipelined:
    """A Redis broker as its `enqueue` sees it, with the dispatch script queued on a pipeline
    instead of run: every attribute but the scripts is the broker's."""

    def __init__(self, broker: Any, pipeline: Any) -> None:
        self._broker = broker
        script = broker.scripts["dispatch"]

        def dispatch(keys: Any = None, args: Any = None) -> Any:
            return script(keys=keys, args=args, client=pipeline)

        self.scripts = {**broker.scripts, "dispatch": dispatch}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):
            from dramatiq.brokers.redis import RedisBroker

            return RedisBroker._dispatch(self, name[len("do_") :])  # type: ignore[arg-type, no-untyped-call]
        return getattr(self._broker, name)


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
