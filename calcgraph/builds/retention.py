"""Registry retention, the adapter: find what the rules say to delete, record it, delete it.

Called by `calcgraph builds cleanup [--dry-run]` and by the `builds.cleanup` actor, each with
its own clock (`now`), so tests drive time. The records are marked `expired` in one unit of
work first and the images and artifacts deleted after its commit: a failed commit then never
leaves a record that names something already gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from calcgraph.builds.artifact import ARTIFACT_PREFIX, delete_artifact
from calcgraph.builds.docker_builder import DOCKER_PREFIX, docker_client, remove_image
from calcgraph.builds.pip import BuildFailed
from calcgraph.db.engine import Database
from calcgraph.domain.builds.repository import BuildRepository
from calcgraph.domain.builds.retention_rules import (
    BaseImage,
    Deletion,
    RetentionPolicy,
    base_deletions,
    function_deletions,
    references_to_remove,
)
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.builds.retention")


@dataclass(frozen=True)
class CleanupReport:
    deletions: tuple[Deletion, ...]
    removed: tuple[str, ...]
    """References actually deleted (none on a dry run)."""
    dry_run: bool

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        shown = [f"{verb} {d.reference}: {d.reason}" for d in self.deletions]
        return shown or ["nothing to delete"]


def policy_from(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        function_max_age=timedelta(days=settings.retention_function_days),
        function_max_versions=settings.retention_function_versions,
        base_max_age=timedelta(days=settings.retention_base_days),
    )


async def cleanup(
    database: Database, settings: Settings, now: datetime, *, dry_run: bool = False
) -> CleanupReport:
    policy = policy_from(settings)
    async with database.write_session() as session:
        repository = BuildRepository.from_session(session)
        stored = await repository.stored()
        deletions = function_deletions(stored, now, policy)
        if not dry_run:
            await repository.mark_expired([d.build_id for d in deletions if d.build_id])
    references = references_to_remove(stored, deletions)
    bases = await asyncio.to_thread(_base_images, settings)
    deletions += base_deletions(bases, now, policy)
    references |= {d.reference for d in deletions if d.build_id is None}
    removed: list[str] = []
    if not dry_run:
        removed = await asyncio.to_thread(_remove, settings, sorted(references))
    for deletion in deletions:
        verb = "would delete" if dry_run else "delete"
        log.info("%s %s: %s", verb, deletion.reference, deletion.reason)
    return CleanupReport(tuple(deletions), tuple(removed), dry_run)


def _base_images(settings: Settings) -> list[BaseImage]:
    """Every tag of the base image repository in the local engine (none without docker)."""
    from docker.errors import DockerException  # imported on use: the SDK is slow to import

    if settings.sandbox_kind != "docker":
        return []
    repository, _, _ = settings.sandbox_base_image.partition(":")
    configured = settings.sandbox_base_image
    if ":" not in configured.rsplit("/", 1)[-1]:
        configured += ":latest"
    try:
        client = docker_client(settings.docker_host)
    except BuildFailed as exc:
        log.warning("base image retention skipped: %s", exc)
        return []
    try:
        found: list[BaseImage] = []
        for image in client.images.list(name=repository):
            created = _created(image.attrs.get("Created", ""))
            for tag in image.tags:
                found.append(BaseImage("docker:" + tag, created, tag == configured))
        return found
    except DockerException as exc:
        log.warning("base image retention skipped: %s", exc)
        return []
    finally:
        client.close()


def _created(text: str) -> datetime:
    # The engine writes nanoseconds; datetime takes microseconds.
    head, _, rest = text.partition(".")
    try:
        return datetime.fromisoformat(head).replace(tzinfo=UTC)
    except ValueError:
        return datetime.now(UTC)


def _remove(settings: Settings, references: list[str]) -> list[str]:
    from docker.errors import DockerException

    removed: list[str] = []
    client: Any = None
    try:
        for reference in references:
            try:
                if reference.startswith(ARTIFACT_PREFIX):
                    gone = delete_artifact(settings.build_dir, reference)
                elif reference.startswith(DOCKER_PREFIX):
                    client = client or docker_client(settings.docker_host)
                    gone = remove_image(client, reference.removeprefix(DOCKER_PREFIX))
                else:
                    continue
            except (OSError, DockerException, BuildFailed) as exc:
                # One image in use must not stop the rest; the next run tries again.
                log.warning("could not delete %s: %s", reference, exc)
                continue
            if gone:
                removed.append(reference)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
    return removed
