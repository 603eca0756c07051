"""Per-function resources (contract 11): `resources: {memory_mb, cpus, timeout_s}`, at most
the specification's worker limits, or `profile: compute`, its planned compute limits. Pure.

A declared figure narrows the worker's limit for that function's jobs; a key left out keeps
the worker's. The worker applies the smaller of the two (an operator's lower cap still holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAXIMA: dict[str, float] = {"memory_mb": 2048, "cpus": 2, "timeout_s": 300}
"""The specification's worker limits: 2 GB memory, 2 CPUs, 300 s."""
MINIMA: dict[str, float] = {"memory_mb": 32, "cpus": 0.05, "timeout_s": 0.1}
"""Below these a Python interpreter cannot start or run a handler at all."""
PROFILES: dict[str, dict[str, float]] = {
    "compute": {"memory_mb": 256, "cpus": 0.5, "timeout_s": 30},
}
"""The specification's planned compute limits."""
RESOURCE_KEYS = tuple(MAXIMA)


def resolved(resources: Mapping[str, float] | None, profile: str | None) -> dict[str, Any] | None:
    """The figures a version stores: the profile's, or the declared keys; None for neither."""
    if profile is not None:
        return dict(PROFILES[profile])
    if resources:
        return {key: resources[key] for key in RESOURCE_KEYS if key in resources}
    return None
