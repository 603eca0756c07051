"""The shape every door calls a service use case in: `(session, principal, *arguments)`,
awaited for its answer (REST's `Call.read`/`Call.write`, GraphQL's `resolvers.unit`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal

P = ParamSpec("P")
R = TypeVar("R")

UseCase = Callable[Concatenate[AsyncSession, Principal, P], Awaitable[R]]
