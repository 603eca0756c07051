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
    "preflight",
]

# What to do when the configured backend cannot enforce the limits here (contract section 1).
FIXES = {
    "bwrap": "install bubblewrap (`apt-get install bubblewrap`, or `make run`), or start Docker "
    "and set CALCGRAPH_SANDBOX=docker",
    "docker": "start Docker (`dockerd`, or `systemctl start docker`) with the base image "
    "(`scripts/ensure-sandboxes.sh` builds it), or install bubblewrap "
    "(`apt-get install bubblewrap`) and set CALCGRAPH_SANDBOX=bwrap",
    "process": "run as root for a network namespace of its own, or install bubblewrap "
    "(`apt-get install bubblewrap`) and set CALCGRAPH_SANDBOX=bwrap",
}


def limits_from(settings: Settings) -> Limits:
    """The specification's limits with the configured timeout, process count and CPU
    priority."""
    return Limits(
        timeout_seconds=settings.sandbox_timeout_seconds,
        pids=settings.sandbox_pids,
        niceness=settings.sandbox_niceness,
    )


def preflight(settings: Settings, kind: SandboxKind | None = None) -> None:
    """Refuse to start (serve, worker, demo) when the configured backend cannot enforce the
    worker limits on this host: raises SandboxUnavailable naming the fix. Never falls back to a
    weaker backend. (`process` is checked, and says it is for a single trusted user, when the
    workers create it: once per start.)"""
    if (kind or settings.sandbox_kind) != "process":
        create_backend(settings, kind, check=True).close()


def create_backend(
    settings: Settings, kind: SandboxKind | None = None, *, check: bool = False
) -> SandboxBackend:
    """The configured backend (`kind` overrides the setting). Raises SandboxUnavailable when the
    backend cannot run here, and with `check` when it cannot enforce every limit (the message
    names the fix); otherwise call `enforcement()` on it to fail closed before the first job."""
    chosen = kind or settings.sandbox_kind
    try:
        backend = _create(settings, chosen)
        if check:
            backend.enforcement()
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(
            f"CALCGRAPH_SANDBOX={chosen}: {exc}. To fix: {FIXES[chosen]}. "
            "Refusing to run other users' code in a weaker sandbox."
        ) from exc
    return backend


def _create(settings: Settings, chosen: SandboxKind) -> SandboxBackend:
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
    return WarmPool(
        backend or create_backend(settings),
        max_size=settings.warm_pool_size,
        max_idle_seconds=settings.warm_idle_seconds,
    )
