"""What an actor is to this codebase: a named function of the process's runtime and the
message's keyword arguments (`ActorSpec`), declared on a worker process's broker by its
assembly. Actors take ids and are idempotent (architecture, rule 5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

import dramatiq

from calcgraph.workers.broker import QUEUE, time_limit_ms
from calcgraph.workers.runtime import CodeRuntime, WorkerRuntime


@dataclass(frozen=True)
class ActorSpec:
    name: str
    fn: Callable[..., None]
    """Called as `fn(runtime, **kwargs)`: a `CodeRuntime` when `runs_code`, else a
    `WorkerRuntime`."""
    options: dict[str, Any] = field(default_factory=dict)
    """Dramatiq actor options (`max_retries`, `retry_when`, `time_limit`, ...)."""
    runs_code: bool = False
    """Runs user code in a sandbox: the process then builds its sandbox backend and warm pool."""


def declare_actors(
    broker: dramatiq.Broker, runtime: WorkerRuntime, actors: Sequence[ActorSpec]
) -> None:
    for spec in actors:
        if spec.name in broker.actors:
            continue
        if spec.runs_code and not isinstance(runtime, CodeRuntime):
            raise TypeError(f"actor {spec.name!r} runs code: its runtime needs sandboxes")
        dramatiq.Actor(
            _bound(spec, runtime),
            broker=broker,
            actor_name=spec.name,
            queue_name=QUEUE,
            priority=0,
            # Every actor has a time limit; the sandbox's own timeout fires first.
            options={"time_limit": time_limit_ms(runtime.settings), **spec.options},
        )


def _bound(spec: ActorSpec, runtime: WorkerRuntime) -> Callable[..., None]:
    @wraps(spec.fn)
    def actor(**kwargs: Any) -> None:
        spec.fn(runtime, **kwargs)

    return actor
