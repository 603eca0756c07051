"""All SQL of builds: records of each build, the build a function version runs from, and the
stored images and artifacts retention looks at."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update

from calcgraph.db.base import RepositoryBase
from calcgraph.domain.builds.models import Build
from calcgraph.domain.builds.retention_rules import StoredBuild
from calcgraph.domain.functions.models import Function

SUCCESS = "success"
EXPIRED = "expired"
"""A successful build whose image or artifact retention deleted; the record stays."""


class BuildRepository(RepositoryBase[Build]):
    model = Build

    async def for_function_version(self, function_version_id: str) -> Build | None:
        """The build a function version runs from: its newest successful one."""
        statement = (
            select(Build)
            .where(Build.function_version_id == function_version_id, Build.build_status == SUCCESS)
            .order_by(Build.finished_at.desc(), Build.id.desc())
            .limit(1)
        )
        return (await self.session.execute(statement)).scalar_one_or_none()

    async def mark_pulled(self, build_id: str, when: datetime) -> None:
        await self.session.execute(
            update(Build).where(Build.id == build_id).values(last_pulled_at=when)
        )

    async def stored(self) -> list[StoredBuild]:
        """Every successful build whose image or artifact still exists, with whether it is
        the build its function's current version runs from."""
        statement = (
            select(Build, Function.current_version_id)
            .join(Function, Function.id == Build.function_id)
            .where(Build.build_status == SUCCESS, Build.docker_image.is_not(None))
            .order_by(Build.function_id, Build.finished_at.desc(), Build.id.desc())
        )
        rows = (await self.session.execute(statement)).all()
        current_seen: set[str] = set()
        stored: list[StoredBuild] = []
        for build, current_version_id in rows:
            # Newest first: only the newest build of the current version is the running one.
            is_current = (
                build.function_version_id is not None
                and build.function_version_id == current_version_id
                and build.function_id not in current_seen
            )
            if is_current:
                current_seen.add(build.function_id)
            assert build.docker_image is not None
            assert build.finished_at is not None
            stored.append(
                StoredBuild(
                    build_id=build.id,
                    function_id=build.function_id,
                    reference=build.docker_image,
                    finished_at=build.finished_at,
                    last_pulled_at=build.last_pulled_at,
                    current=is_current,
                )
            )
        return stored

    async def mark_expired(self, build_ids: Sequence[str]) -> None:
        if build_ids:
            await self.session.execute(
                update(Build).where(Build.id.in_(build_ids)).values(build_status=EXPIRED)
            )
