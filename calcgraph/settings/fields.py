"""How the settings' values are read from the environment and checked, as annotated types for
`Settings`' fields: the type of a field says how its text is split and what it must be. A
refusal names the environment variable, so `calcgraph serve` says which one to fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator
from pydantic_settings import NoDecode

from calcgraph.domain.events.destinations import AllowList

DRIVERS = ("sqlite+aiosqlite", "postgresql+asyncpg")


def comma_separated(value: object) -> object:
    """A comma-separated string as its non-blank parts, stripped; any other value as it is."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _known_driver(url: str) -> str:
    driver = url.split(":", 1)[0]
    if driver not in DRIVERS:
        raise ValueError(
            f"CALCGRAPH_DATABASE_URL must start with sqlite+aiosqlite:// or "
            f"postgresql+asyncpg://, not {driver}://"
        )
    return url


def _seconds(value: object) -> object:
    if isinstance(value, str):
        try:
            return [float(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise ValueError(
                "CALCGRAPH_WEBHOOK_RETRY_SCHEDULE: a comma-separated list of seconds"
            ) from None
    return value


def _schedule_bounds(schedule: list[float]) -> list[float]:
    if len(schedule) > 100 or any(not 0 < s <= 7 * 86400 for s in schedule):
        raise ValueError(
            "CALCGRAPH_WEBHOOK_RETRY_SCHEDULE: at most 100 delays, each above 0 and at "
            "most 604800 seconds"
        )
    return schedule


def _valid_hosts(hosts: list[str]) -> list[str]:
    try:
        AllowList.parse(hosts)
    except ValueError as exc:
        raise ValueError(f"CALCGRAPH_WEBHOOK_ALLOWED_HOSTS: {exc}") from None
    return hosts


def _absolute_roots(roots: list[Path]) -> list[Path]:
    for root in roots:
        if not root.is_absolute():
            raise ValueError(f"CALCGRAPH_GIT_LOCAL_ROOTS: {root} is not an absolute path")
    return roots


NICENESS_MAX = 19
"""The lowest CPU priority the kernel has (niceness runs from -20, the highest, to 19)."""
NICENESS_DEFAULT = 10
"""Sandboxes' niceness steps below the platform by default: a job gets about a tenth of the CPU
a platform process competing with it gets (the kernel's weights 110 and 1024)."""


def _niceness(value: object) -> object:
    """A whole number of niceness steps from 0 to NICENESS_MAX, else a refusal saying so."""
    text = str(value).strip()
    try:
        steps = None if isinstance(value, bool | float) else int(text)
    except ValueError:
        steps = None
    if steps is None or not 0 <= steps <= NICENESS_MAX:
        raise ValueError(
            f"CALCGRAPH_SANDBOX_NICENESS must be a whole number from 0 (jobs at the platform's "
            f"own CPU priority) to {NICENESS_MAX} (the lowest priority), not {text!r}; a "
            "negative value would put users' code above the platform"
        )
    return steps


DatabaseUrl = Annotated[str, AfterValidator(_known_driver)]
"""`sqlite+aiosqlite://...` or `postgresql+asyncpg://...`."""
RetrySchedule = Annotated[
    list[float], NoDecode, BeforeValidator(_seconds), AfterValidator(_schedule_bounds)
]
"""Comma-separated seconds: at most 100, each above 0 and at most a week."""
HostList = Annotated[
    list[str], NoDecode, BeforeValidator(comma_separated), AfterValidator(_valid_hosts)
]
"""Comma-separated host names, addresses or CIDR blocks (`AllowList`)."""
Niceness = Annotated[int, BeforeValidator(_niceness)]
"""How far below the platform's CPU priority sandboxes run: 0 to 19 niceness steps."""
LocalRoots = Annotated[
    list[Path], NoDecode, BeforeValidator(comma_separated), AfterValidator(_absolute_roots)
]
"""Comma-separated absolute folders."""
