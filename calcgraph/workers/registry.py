"""Every actor a worker process declares, listed here so the registry is explicit. Imported by
the assembly (`calcgraph.workers.assembly`) only: the actor modules import the broker and the
runtime, never this list.

Adding an actor: a module with the function and its `ACTORS = [ActorSpec(...)]`, and its
line here. Webhook attempts are no actor: they run asynchronously on the runtime's loop
(`calcgraph.workers.webhooks`), so a hanging receiver holds no job thread."""

from calcgraph.workers import chains, jobs, retention
from calcgraph.workers.actor import ActorSpec

ACTORS: list[ActorSpec] = [
    *jobs.ACTORS,
    *chains.ACTORS,
    *retention.ACTORS,
]
