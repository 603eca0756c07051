"""The outbox buffer: `enqueue` only records a message; the unit of work sends it after commit.

A message sent before its job row is committed could reach a worker that cannot see the row yet
(or ever, after a rollback). So services call `enqueue(...)`, which appends to a buffer bound to
the current unit of work (a ContextVar), and the door's unit of work (`Database.write_session`
with the outbox hook of `calcgraph.workers.flush`) sends the buffer after a successful commit and
drops it on rollback. Pure: no broker here.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

JSONScalar = str | int | float | bool | None

RUN_ACTOR = "jobs.run"
"""The actor that runs one job (a workflow node's chain goes to `chains.run` instead)."""


@dataclass(frozen=True)
class Message:
    """One actor call: the actor's name (`"<feature>.<verb>"`) and JSON-scalar keyword args."""

    actor: str
    kwargs: dict[str, JSONScalar] = field(default_factory=dict)
    message_id: str | None = None
    """Set for a job's message (`job_message_id`): the sweeper asks the broker whether it is
    still there, waiting, before it sends another."""


_JOB_MESSAGES = uuid.UUID("6f1c2a52-3f7e-4f43-9d4e-0c2b1f5d7a10")


_NAMESPACE = _JOB_MESSAGES.bytes


def job_message_id(job_id: str, delivery: int) -> str:
    """The broker message id of a job's `delivery`-th message: derived, so nothing stores it.
    `uuid.uuid5(_JOB_MESSAGES, f"{job_id}:{delivery}")` spelled out: the same id at a third of
    the cost (`uuid.UUID`'s checks and formatting), paid once per job a tick submits."""
    digest = bytearray(hashlib.sha1(_NAMESPACE + f"{job_id}:{delivery}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_BUFFER: ContextVar[list[Message] | None] = ContextVar("calcgraph_outbox", default=None)


class NoOutbox(RuntimeError):
    """`enqueue` was called outside a unit of work that can send messages after its commit."""


def _buffer(actor: str) -> list[Message]:
    buffer = _BUFFER.get()
    if buffer is None:
        raise NoOutbox(
            f"enqueue({actor!r}) outside a write session with an outbox: messages may only "
            "leave after the commit that created their rows"
        )
    return buffer


def enqueue(actor: str, **kwargs: JSONScalar) -> None:
    """Send `actor(**kwargs)` after the current unit of work commits (never if it rolls back)."""
    buffer = _buffer(actor)
    for name, value in kwargs.items():
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise TypeError(f"actor argument {name!r} must be a JSON scalar (an id), not {value!r}")
    buffer.append(Message(actor, dict(kwargs)))


def enqueue_job(actor: str, job_id: str, delivery: int) -> None:
    """`enqueue(actor, job_id=job_id)` as the job's `delivery`-th message (its `deliveries`
    column after this commit)."""
    _buffer(actor).append(Message(actor, {"job_id": job_id}, job_message_id(job_id, delivery)))


@contextmanager
def collecting() -> Iterator[list[Message]]:
    """Open a fresh buffer for one unit of work; nested units get their own."""
    buffer: list[Message] = []
    token = _BUFFER.set(buffer)
    try:
        yield buffer
    finally:
        _BUFFER.reset(token)
