"""Answers of the package lifecycle routes (contract 11), beside `responses.py` to keep both
small: each writes its domain view as it is (`as_viewed`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from calcgraph.domain.packages.views import (
    DeploymentHistoryEntry,
    DeploymentStateView,
    FunctionInterfaceView,
    PackageVersionDetailView,
    PinnedDependencyView,
)
from calcgraph.rest_compat.responses import Out, as_viewed


class FunctionInterfaceOut(Out):
    __annotations__ = as_viewed(FunctionInterfaceView)


class PinnedDependencyOut(Out):
    __annotations__ = as_viewed(PinnedDependencyView)


class PackageVersionDetailOut(Out):
    __annotations__ = as_viewed(
        PackageVersionDetailView,
        functions=list[FunctionInterfaceOut],
        pinned_dependencies=list[PinnedDependencyOut],
        migration_guide=str | dict[str, str] | None,
    )


class InterfaceChangeOut(Out):
    function: str
    change: str
    port: str | None = Field(default=None, exclude_if=lambda v: v is None)
    breaking: bool
    reason: str


class PackageDiffOut(Out):
    package: str
    from_version: str
    to_version: str
    changes: list[InterfaceChangeOut]


class DeploymentHistoryOut(Out):
    __annotations__ = as_viewed(DeploymentHistoryEntry)


class DeploymentStateOut(Out):
    __annotations__ = as_viewed(
        DeploymentStateView,
        history=list[DeploymentHistoryOut],
        traffic_split=dict[str, float] | None,
        observed=dict[str, Any] | None,
        criteria=dict[str, float | None] | None,
    )
