"""What the doors reach in the application: one typed object, built by `calcgraph.app` and
read through one accessor per door (`rest_compat.state.services_of`, the GraphQL context's
`services`). The doors see the use cases and ports here, never the worker-side adapters
behind them (`calcgraph/workers/`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:  # names for the annotations only: importing this module costs nothing
    from sqlalchemy.ext.asyncio import AsyncSession
    from starlette.applications import Starlette

    from calcgraph.auth.login import LoginFlow
    from calcgraph.db.engine import Database
    from calcgraph.domain.access.principal import Principal
    from calcgraph.domain.builds.ports import Builds
    from calcgraph.domain.commit_wait.service import CommitWait
    from calcgraph.domain.events.feed.service import EventFeed
    from calcgraph.domain.packages.publishing.sources import SourceFetcher
    from calcgraph.ops.metrics import Metrics
    from calcgraph.serving.ratelimit import Limiter
    from calcgraph.settings import Settings


P = ParamSpec("P")
R = TypeVar("R")

UseCase = Callable[Concatenate["AsyncSession", "Principal", P], Awaitable[R]]
"""A service use case as every door calls it: `(session, principal, *arguments)`, awaited for
its answer (REST's `Call.read`/`Call.write`, GraphQL's `resolvers.unit`)."""

StagedUseCase = Callable[Concatenate["Database", "Principal", P], Awaitable[R]]
"""A use case that opens its own units of work (REST's `Call.staged`, GraphQL's
`resolvers.unit.staged`): short reads, then CPU-heavy pure work holding no session (and so no
pooled connection, nor SQLite's write lock), then one write transaction that checks again what
may have changed meanwhile (saving a workflow: its validation; creating a run: its plan)."""


class Probes(Protocol):
    """What /health and /metrics ask of the job backbone (broker, result cache, notifier)."""

    async def redis_reachable(self) -> bool | None:
        """Whether Redis answers; None without Redis."""
        ...

    async def queue_length(self) -> int | None:
        """Messages waiting in the job queue; None while the broker cannot say."""
        ...


@dataclass(frozen=True)
class Services:
    settings: Settings
    database: Database
    identity: LoginFlow
    """The identity adapters: the sign-in flow, with the authenticator and provider it uses."""
    execution: CommitWait
    probes: Probes
    metrics: Metrics
    limiter: Limiter | None
    # The adapters behind the domain's ports, built once from the settings.
    builds: Builds
    sources: SourceFetcher
    events: EventFeed
    """The event log's pull and push (GET /events, GraphQL `events`)."""


def services_of(app: Starlette) -> Services:
    services: Services = app.state.services
    return services
