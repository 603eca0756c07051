"""Registry retention (spec: Limits): which built images and artifacts to delete.

Pure: given what exists and `now`, decide. User function builds go 90 days after their last
pull (the end of the build when never pulled) and beyond the 10 newest per function; base
images go 365 days after they were made. Two guards the specification does not spell out:
the build of a function's current version is always kept (deleting it would leave a function
that cannot run), and the configured base image is always kept (every build starts from it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from calcgraph.domain.builds.limits import (
    BASE_MAX_AGE_DAYS,
    FUNCTION_MAX_AGE_DAYS,
    FUNCTION_MAX_VERSIONS,
)


@dataclass(frozen=True)
class RetentionPolicy:
    function_max_age: timedelta = timedelta(days=FUNCTION_MAX_AGE_DAYS)
    function_max_versions: int = FUNCTION_MAX_VERSIONS
    base_max_age: timedelta = timedelta(days=BASE_MAX_AGE_DAYS)


@dataclass(frozen=True)
class StoredBuild:
    build_id: str
    function_id: str
    reference: str
    """`docker:<image>` or `artifact:<sha256>`."""
    finished_at: datetime
    last_pulled_at: datetime | None
    current: bool
    """Whether it is the build the function's current version runs from."""

    @property
    def last_used(self) -> datetime:
        return self.last_pulled_at or self.finished_at


@dataclass(frozen=True)
class BaseImage:
    reference: str
    created_at: datetime
    configured: bool


@dataclass(frozen=True)
class Deletion:
    reference: str
    reason: str
    build_id: str | None = None


def function_deletions(
    builds: Iterable[StoredBuild], now: datetime, policy: RetentionPolicy = RetentionPolicy()
) -> list[Deletion]:
    """Builds to delete, oldest reasons first. Versions are ordered by build time per function."""
    by_function: dict[str, list[StoredBuild]] = {}
    for build in builds:
        by_function.setdefault(build.function_id, []).append(build)
    deletions: list[Deletion] = []
    for function_id in sorted(by_function):
        newest_first = sorted(
            by_function[function_id], key=lambda b: (b.finished_at, b.build_id), reverse=True
        )
        for rank, build in enumerate(newest_first):
            if build.current:
                continue
            idle = now - build.last_used
            if idle > policy.function_max_age:
                reason = f"not pulled for {idle.days} days (limit {policy.function_max_age.days})"
            elif rank >= policy.function_max_versions:
                reason = (
                    f"version {rank + 1} by age of its function "
                    f"(at most {policy.function_max_versions} kept)"
                )
            else:
                continue
            deletions.append(Deletion(build.reference, reason, build.build_id))
    return deletions


def base_deletions(
    images: Sequence[BaseImage], now: datetime, policy: RetentionPolicy = RetentionPolicy()
) -> list[Deletion]:
    deletions: list[Deletion] = []
    for image in images:
        age = now - image.created_at
        if not image.configured and age > policy.base_max_age:
            reason = f"base image {age.days} days old (limit {policy.base_max_age.days})"
            deletions.append(Deletion(image.reference, reason))
    return deletions


def references_to_remove(builds: Iterable[StoredBuild], deletions: Sequence[Deletion]) -> set[str]:
    """Images and artifacts no kept build names: artifacts are content-addressed, so two builds
    can share one, and it goes only with the last build that names it."""
    deleted = {d.build_id for d in deletions if d.build_id is not None}
    kept = {b.reference for b in builds if b.build_id not in deleted}
    return {d.reference for d in deletions if d.reference not in kept}
