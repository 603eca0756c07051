"""Read models of packages, as both doors serialise them. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from calcgraph.domain.access.views import OwnedView


@dataclass(frozen=True)
class PackageView(OwnedView):
    id: str
    name: str
    description: str | None
    current_version: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DeployedFunctionView:
    """One function of one deployment: which version it carried and what it did to it."""

    package_version_id: str
    function_id: str
    name: str
    version: str
    version_id: str
    status: str
    """`new`, `updated` or `unchanged`."""
    deployed_at: datetime


@dataclass(frozen=True)
class PackageVersionView:
    id: str
    package_id: str
    version: str
    git_ref: str | None
    git_commit: str | None
    is_latest: bool
    is_stable: bool
    changelog: dict[str, Any] | None
    """The `package.changelog` entry of this version, if the manifest had one."""
    created_at: datetime
    functions: tuple[DeployedFunctionView, ...] = ()


@dataclass(frozen=True)
class PackageVersionsView:
    """`GET /packages/{package_name}/versions`: every deployment, oldest first."""

    package: PackageView
    versions: tuple[PackageVersionView, ...]


@dataclass(frozen=True)
class FunctionDeployment:
    """One function's line of a deployment report (spec, Versioning 8)."""

    name: str
    version: str
    checksum: str
    status: str
    changelog: str | None
    function_id: str
    version_id: str
    is_breaking_change: bool
    breaking_reasons: tuple[str, ...]
    deprecated: bool

    @property
    def endpoint(self) -> str:
        # The version id pins exactly this immutable version (see functions.service).
        return f"/functions/{self.version_id}/execute"


@dataclass(frozen=True)
class DeploymentReport:
    package_id: str
    package: str
    package_version: str
    package_version_id: str
    is_latest: bool
    is_stable: bool
    git_ref: str | None
    git_commit: str | None
    functions: tuple[FunctionDeployment, ...]
    removed_functions: tuple[str, ...]
    warnings: tuple[str, ...]
    breaking_changes: tuple[dict[str, Any], ...] = ()
    """Interface breaks against the current versions (contract 11): `function`, `change`,
    `port`, `breaking`, `reason`."""
    dependencies: dict[str, str] = field(default_factory=dict)
    """The declared dependencies as pinned, `{name: version}` (contract 11)."""
    dependency_closure: dict[str, str] = field(default_factory=dict)
    """Every package staged beside the code: the pins and what they brought along."""


@dataclass(frozen=True)
class FunctionInterfaceView:
    """One function of a deployment with its typed interface and deprecation."""

    name: str
    version: str
    version_id: str
    typed: bool
    inputs_schema: dict[str, Any] | None
    outputs_schema: dict[str, Any] | None
    deprecated: bool
    deprecated_message: str | None
    removal_version: str | None


@dataclass(frozen=True)
class PinnedDependencyView:
    """One package a deployment pinned (contract 11): declared, or brought along."""

    name: str
    version: str
    package_id: str
    direct: bool
    """Declared by this version's manifest; False: pinned by one of its dependencies."""
    range: str | None
    """The declared range, for a direct one."""


@dataclass(frozen=True)
class PackageVersionDetailView:
    """`GET /packages/{id}/versions/{version}` (contract 11): one deployment with what its
    manifest said of compatibility, migration and changes, and each function's interface."""

    id: str
    package_id: str
    package: str
    version: str
    is_latest: bool
    is_stable: bool
    git_ref: str | None
    git_commit: str | None
    created_at: datetime
    changelog: dict[str, Any] | None
    """The `package.changelog` entry of this version."""
    compatibility: dict[str, Any] | None
    migration_guide: str | dict[str, str] | None
    dependencies: dict[str, str]
    """Declared ranges, by package name."""
    functions: tuple[FunctionInterfaceView, ...]
    pinned_dependencies: tuple[PinnedDependencyView, ...] = ()
    """What it was deployed with and its handlers import: the direct pins, then the
    packages they brought along."""


@dataclass(frozen=True)
class PackageDiffView:
    """`GET /packages/{id}/diff`: the interface changes from one version to another."""

    package: str
    from_version: str
    to_version: str
    changes: tuple[dict[str, Any], ...]
    """`function`, `change`, `port`, `breaking`, `reason` (see `interface_diff`)."""


@dataclass(frozen=True)
class DeploymentHistoryEntry:
    version: str
    action: str
    """`deployed`, `promoted` or `rolled_back`."""
    at: datetime
    reason: str | None


@dataclass(frozen=True)
class DeploymentStateView:
    """`GET /packages/{id}/deployment` (contract 11)."""

    package_id: str
    strategy: str
    state: str
    """`stable`, `awaiting_promotion` while a blue-green candidate is hosted and off, or
    `canary` while unpinned calls are shared by a canary's split."""
    current: str | None
    candidate: str | None
    traffic_split: dict[str, float] | None
    started_at: datetime | None
    ends_at: datetime | None
    observed: dict[str, Any] | None
    history: tuple[DeploymentHistoryEntry, ...]
    criteria: dict[str, float | None] | None = None
    """A running canary's `error_rate_max` (a fraction) and `latency_p95_max_ms`."""
    viewer_may_decide: bool = False
    """Whether the caller may promote and roll back (the policy's `manage_package`)."""
