"""Sandbox backends behind one interface, and the warm pool.

    backend = create_backend(settings)        # CALCGRAPH_SANDBOX: docker, bwrap or process
    backend.enforcement()                     # fail closed now rather than on the first job
    pool = create_pool(settings, backend)
    result = pool.run(function_version_id, RunRequest(code_dir, "beam:cantilever",
                      {"length": 2.0, "force": 1000.0}, ("deflection", "moment"),
                      limits_from(settings)))

Backends are imported lazily: the docker SDK is only loaded where it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calcgraph.workers.sandbox.base import (
    LIMIT_NAMES,
    NOT_ENFORCED,
    ErrorKind,
    GiB,
    KiB,
    Limits,
    MiB,
    RunError,
    RunRequest,
    RunResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
)
from calcgraph.workers.sandbox.pool import WarmPool

if TYPE_CHECKING:
    from calcgraph.settings import SandboxKind, Settings

__all__ = [
    "LIMIT_NAMES",
    "NOT_ENFORCED",
    "ErrorKind",
    "GiB",
    "KiB",
    "MiB",
    "Limits",
    "RunError",
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "WarmPool",
    "create_backend",
    "create_pool",
    "limits_from",
]


def limits_from(settings: Settings) -> Limits:
    """The specification's limits with the configured timeout and process count."""
    return Limits(timeout_seconds=settings.sandbox_timeout_seconds, pids=settings.sandbox_pids)


def create_backend(settings: Settings, kind: SandboxKind | None = None) -> SandboxBackend:
    """The configured backend (`kind` overrides the setting). Raises SandboxUnavailable when the
    backend cannot run here; call `enforcement()` on it to fail closed before the first job."""
    chosen = kind or settings.sandbox_kind
    if chosen == "docker":
        from calcgraph.workers.sandbox.docker import DockerBackend

        return DockerBackend(
            base_url=settings.docker_host,
            base_image=settings.sandbox_base_image,
            registry=settings.sandbox_registry,
            fallback_registry=settings.sandbox_fallback_registry,
            pull_timeout_seconds=settings.sandbox_pull_timeout_seconds,
        )
    if chosen == "bwrap":
        from calcgraph.workers.sandbox.bwrap import BwrapBackend

        return BwrapBackend()
    from calcgraph.workers.sandbox.process import ProcessBackend

    return ProcessBackend()  # logs its loud warning


def create_pool(settings: Settings, backend: SandboxBackend | None = None) -> WarmPool:
    return WarmPool(backend or create_backend(settings), max_size=settings.warm_pool_size)
