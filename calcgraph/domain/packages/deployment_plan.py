"""What the deployment decision (`versioning.plan_deployment`) reads and decides: the stored
history of a package and its functions, and the plan of one deployment, as frozen values."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from calcgraph.domain.packages.interface_diff import InterfaceChange
from calcgraph.domain.packages.manifest_package import Release
from calcgraph.domain.read_models import attributes

Status = Literal["new", "updated", "unchanged"]


@dataclass(frozen=True)
class ExistingFunctionVersion:
    """What the platform stored for one version of a function."""

    version: str
    checksum: str
    handler: str
    inputs_schema: Mapping[str, Any] | None = None
    outputs_schema: Mapping[str, Any] | None = None
    deprecated: bool = False
    deprecated_message: str | None = None
    removal_version: str | None = None
    changelog: str | None = None
    id: str | None = None
    resources: Mapping[str, Any] | None = None
    dependencies: Mapping[str, str] = field(default_factory=dict)
    """The dependency closure it was deployed with, `{name: version}` (contract 11): part of
    its immutable record, since its code imports them."""


@dataclass(frozen=True)
class FunctionHistory:
    current: str
    """`Function.current_version`: the one the auto rule compares with."""
    versions: Mapping[str, ExistingFunctionVersion]
    """Every stored version of the function, keyed by version string."""


@dataclass(frozen=True)
class PackageHistory:
    versions: Collection[str] = ()
    """Every existing version of the package."""
    functions: Mapping[str, FunctionHistory] = field(default_factory=dict)
    """Functions the package already has, by name."""


@dataclass(frozen=True)
class FunctionPlan:
    name: str
    version: str
    checksum: str
    status: Status
    handler: str
    typed: bool
    inputs_schema: dict[str, Any] | None
    outputs_schema: dict[str, Any] | None
    changelog: str | None
    is_breaking_change: bool
    breaking_reasons: tuple[str, ...]
    deprecated: bool
    deprecated_message: str | None
    removal_version: str | None
    previous_version: str | None
    becomes_current: bool
    """Whether `Function.current_version` moves to this version."""
    interface_changes: tuple[InterfaceChange, ...] = ()
    """How its typed interface differs from the previous current version's."""
    resources: dict[str, Any] | None = None
    """Declared per-function limits (contract 11)."""

    def report(self) -> dict[str, Any]:
        """One entry of the deployment response's `functions` (spec, Versioning 8)."""
        return attributes(self, "name", "version", "checksum", "status", "changelog")


@dataclass(frozen=True)
class DeploymentPlan:
    package_name: str
    package_version: str
    is_stable: bool
    is_latest: bool
    """When true, the service clears `is_latest` on the package's other versions."""
    functions: tuple[FunctionPlan, ...]
    removed_functions: tuple[str, ...]
    """Functions of the package's history that this manifest no longer declares."""
    changelog: Release | None
    warnings: tuple[str, ...] = ()
    breaking_changes: tuple[InterfaceChange, ...] = ()
    """Interface breaks against the current versions (contract 11), removed functions too."""

    def report(self) -> dict[str, Any]:
        return {
            "package_version": self.package_version,
            "functions": [f.report() for f in self.functions],
        }
