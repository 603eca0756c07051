"""Tenant-safety fixtures: the sandbox fixtures (every backend this machine has) and the
execution platform (both databases) of the suites they come from."""

from __future__ import annotations

from tests.execution.conftest import any_sandbox_platform, exec_url
from tests.sandbox.conftest import _close_backends, limits, make_code, run, sandbox_backend

__all__ = [
    "_close_backends",
    "any_sandbox_platform",
    "exec_url",
    "limits",
    "make_code",
    "run",
    "sandbox_backend",
]
