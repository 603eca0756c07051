"""Read models of functions. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class FunctionView:
    id: str
    name: str
    package_id: str
    package: str
    """The package's name."""
    current_version: str | None
    current_version_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class FunctionVersionView:
    """An immutable function version with every field of the specification."""

    id: str
    function_id: str
    package_version_id: str
    """The deployment that first carried this version (its code is that deployment's)."""
    version: str
    handler: str
    code_checksum: str
    inputs_schema: dict[str, Any] | None
    outputs_schema: dict[str, Any] | None
    typed: bool
    changelog: str | None
    is_breaking_change: bool
    deprecated: bool
    deprecated_message: str | None
    removal_version: str | None
    created_at: datetime
    deployed_at: datetime
    resources: dict[str, Any] | None = None
    """Declared per-function limits `{memory_mb, cpus, timeout_s}` (contract 11); None: the
    worker's limits."""


@dataclass(frozen=True)
class FunctionVersionEntry:
    """One line of `GET /functions/{name}/versions`: a function version as one deployment
    carried it, so a version kept `unchanged` appears once per deployment."""

    version: str
    version_id: str
    deployed_at: datetime
    package_version: str
    package_version_id: str
    status: str
    changelog: str | None
    deprecated: bool
    deprecated_message: str | None
    is_breaking_change: bool


@dataclass(frozen=True)
class FunctionVersionsView:
    function: FunctionView
    versions: tuple[FunctionVersionEntry, ...]


@dataclass(frozen=True)
class FunctionDetailView:
    """`GET /functions/{function_id}`: the function and its current version's typed I/O."""

    function: FunctionView
    current: FunctionVersionView | None


@dataclass(frozen=True)
class ResolvedFunction:
    """What a versioned call or a workflow reference addresses: exactly one version."""

    function: FunctionView
    version: FunctionVersionView
