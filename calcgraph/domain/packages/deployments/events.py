"""The events of a change of a package's current version (contract sections 9 and 11)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.events.catalog import DEPLOYMENT_PROMOTED, DEPLOYMENT_ROLLED_BACK
from calcgraph.domain.events.service import record
from calcgraph.domain.packages.models import Package


async def announce(
    session: AsyncSession,
    package: Package,
    version: str,
    previous: str | None,
    action: str,
    why: str,
) -> None:
    """`calcgraph.deployment.promoted` / `.rolled_back` (contract sections 9 and 11), in the
    unit of work that changed the current version, beside its history row."""
    await record(
        session,
        DEPLOYMENT_PROMOTED if action == "promoted" else DEPLOYMENT_ROLLED_BACK,
        package.id,
        {"package": package.name, "version": version, "previous": previous, "reason": why},
    )
