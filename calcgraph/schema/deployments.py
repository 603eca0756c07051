"""GraphQL types of the package lifecycle (contract 11): a package's deployment state and
history, one version in detail, the interface diff of two versions."""

from __future__ import annotations

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.packages.views import (
    DeploymentHistoryEntry,
    DeploymentStateView,
    PackageDiffView,
    PackageVersionDetailView,
    PinnedDependencyView,
)
from calcgraph.schema.viewed import FromView, view_fields


@strawberry.type(name="DeploymentHistoryEntry", description="One change of the current version.")
@view_fields(
    {
        "version": "The version the change concerns.",
        "action": "`deployed`, `canary_started`, `promoted` or `rolled_back`.",
        "at": "When.",
        "reason": "Why, and by whom.",
    }
)
class DeploymentHistoryEntryType(FromView[DeploymentHistoryEntry]):
    pass


@strawberry.type(name="DeploymentState", description="Which version unpinned calls get.")
@view_fields(
    {
        "package_id": "The package.",
        "strategy": "`rolling`, `blue-green` or `canary`.",
        "state": "`stable`, `awaiting_promotion` or `canary`.",
        "current": "What unpinned calls run.",
        "candidate": "A hosted version awaiting promotion.",
        "traffic_split": "Canary shares by version.",
        "started_at": "Start of a canary.",
        "ends_at": "When a canary is judged.",
        "observed": "A running canary's candidate: jobs, failed, error_rate, latency_p95_ms; "
        "and routed, the calls each version got.",
        "history": "Oldest first.",
        "criteria": "A running canary's success criteria: `error_rate_max` (a fraction), "
        "`latency_p95_max_ms`.",
        "viewer_may_decide": "Whether the caller may promote and roll back this package.",
    },
    history=list[DeploymentHistoryEntryType],
)
class DeploymentStateType(FromView[DeploymentStateView]):
    pass


@strawberry.type(
    name="PinnedDependency", description="A package a deployment pinned (contract 11)."
)
@view_fields(
    {
        "name": "The dependency's package name.",
        "version": "The pinned version.",
        "package_id": "The dependency's package.",
        "direct": "Declared by this version; false: brought along by a dependency's pins.",
        "range": "The declared range, for a direct one.",
    }
)
class PinnedDependencyType(FromView[PinnedDependencyView]):
    pass


@strawberry.type(name="PackageVersionDetail", description="One package version in detail.")
@view_fields(
    {
        "id": "The deployment's identifier.",
        "package_id": "The package.",
        "package": "Package name.",
        "version": "The package version.",
        "is_latest": "The current version.",
        "is_stable": "False for a pre-release.",
        "created_at": "Deployment time.",
        "changelog": "Changelog entry of this version.",
        "compatibility": "The manifest's compatibility.",
        "migration_guide": "Text, or a text per version.",
        "dependencies": "Declared ranges by package name.",
        "pinned_dependencies": "What it was deployed with and its handlers import: the direct "
        "pins first, then the packages they brought along.",
        "functions": "Each function: name, version, version_id, typed, inputs_schema, "
        "outputs_schema, deprecated, deprecated_message, removal_version.",
    },
    pinned_dependencies=list[PinnedDependencyType],
    functions=JSON,
)
class PackageVersionDetailType(FromView[PackageVersionDetailView]):
    @classmethod
    def from_view(cls, view: PackageVersionDetailView) -> PackageVersionDetailType:
        return cls.viewing(view, functions=[f.__dict__ for f in view.functions])


@strawberry.type(name="PackageDiff", description="Interface changes between two versions.")
@view_fields(
    {
        "package": "Package name.",
        "from_version": "The older version.",
        "to_version": "The newer version.",
        "changes": "Each change: function, change, port, breaking, reason.",
    },
    changes=JSON,
)
class PackageDiffType(FromView[PackageDiffView]):
    @classmethod
    def from_view(cls, view: PackageDiffView) -> PackageDiffType:
        return cls.viewing(view, changes=list(view.changes))
