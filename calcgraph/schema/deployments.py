"""GraphQL types of the package lifecycle (contract 11): a package's deployment state and
history, one version in detail, the interface diff of two versions."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.packages.views import (
    DeploymentHistoryEntry,
    DeploymentStateView,
    PackageDiffView,
    PackageVersionDetailView,
    PinnedDependencyView,
)
from calcgraph.domain.read_models import from_attributes
from calcgraph.schema.viewed import FromView


@strawberry.type(name="DeploymentHistoryEntry", description="One change of the current version.")
class DeploymentHistoryEntryType(FromView[DeploymentHistoryEntry]):
    version: str = strawberry.field(description="The version the change concerns.")
    action: str = strawberry.field(
        description="`deployed`, `canary_started`, `promoted` or `rolled_back`."
    )
    at: datetime = strawberry.field(description="When.")
    reason: str | None = strawberry.field(description="Why, and by whom.")


@strawberry.type(name="DeploymentState", description="Which version unpinned calls get.")
class DeploymentStateType:
    package_id: str = strawberry.field(description="The package.")
    strategy: str = strawberry.field(description="`rolling`, `blue-green` or `canary`.")
    state: str = strawberry.field(description="`stable`, `awaiting_promotion` or `canary`.")
    current: str | None = strawberry.field(description="What unpinned calls run.")
    candidate: str | None = strawberry.field(description="A hosted version awaiting promotion.")
    traffic_split: JSON | None = strawberry.field(description="Canary shares by version.")
    started_at: datetime | None = strawberry.field(description="Start of a canary.")
    ends_at: datetime | None = strawberry.field(description="When a canary is judged.")
    observed: JSON | None = strawberry.field(
        description="A running canary's candidate: jobs, failed, error_rate, latency_p95_ms; "
        "and routed, the calls each version got."
    )
    history: list[DeploymentHistoryEntryType] = strawberry.field(description="Oldest first.")
    criteria: JSON | None = strawberry.field(
        description="A running canary's success criteria: `error_rate_max` (a fraction), "
        "`latency_p95_max_ms`."
    )
    viewer_may_decide: bool = strawberry.field(
        description="Whether the caller may promote and roll back this package."
    )

    @classmethod
    def from_view(cls, view: DeploymentStateView) -> DeploymentStateType:
        history = [DeploymentHistoryEntryType.from_view(e) for e in view.history]
        return from_attributes(cls, view, history=history)


@strawberry.type(
    name="PinnedDependency", description="A package a deployment pinned (contract 11)."
)
class PinnedDependencyType(FromView[PinnedDependencyView]):
    name: str = strawberry.field(description="The dependency's package name.")
    version: str = strawberry.field(description="The pinned version.")
    package_id: str = strawberry.field(description="The dependency's package.")
    direct: bool = strawberry.field(
        description="Declared by this version; false: brought along by a dependency's pins."
    )
    range: str | None = strawberry.field(description="The declared range, for a direct one.")


@strawberry.type(name="PackageVersionDetail", description="One package version in detail.")
class PackageVersionDetailType:
    id: str = strawberry.field(description="The deployment's identifier.")
    package_id: str = strawberry.field(description="The package.")
    package: str = strawberry.field(description="Package name.")
    version: str = strawberry.field(description="The package version.")
    is_latest: bool = strawberry.field(description="The current version.")
    is_stable: bool = strawberry.field(description="False for a pre-release.")
    created_at: datetime = strawberry.field(description="Deployment time.")
    changelog: JSON | None = strawberry.field(description="Changelog entry of this version.")
    compatibility: JSON | None = strawberry.field(description="The manifest's compatibility.")
    migration_guide: JSON | None = strawberry.field(description="Text, or a text per version.")
    dependencies: JSON = strawberry.field(description="Declared ranges by package name.")
    pinned_dependencies: list[PinnedDependencyType] = strawberry.field(
        description="What it was deployed with and its handlers import: the direct pins "
        "first, then the packages they brought along."
    )
    functions: JSON = strawberry.field(
        description="Each function: name, version, version_id, typed, inputs_schema, "
        "outputs_schema, deprecated, deprecated_message, removal_version."
    )

    @classmethod
    def from_view(cls, view: PackageVersionDetailView) -> PackageVersionDetailType:
        return from_attributes(
            cls,
            view,
            pinned_dependencies=[
                PinnedDependencyType.from_view(p) for p in view.pinned_dependencies
            ],
            functions=[f.__dict__ for f in view.functions],
        )


@strawberry.type(name="PackageDiff", description="Interface changes between two versions.")
class PackageDiffType:
    package: str = strawberry.field(description="Package name.")
    from_version: str = strawberry.field(description="The older version.")
    to_version: str = strawberry.field(description="The newer version.")
    changes: JSON = strawberry.field(
        description="Each change: function, change, port, breaking, reason."
    )

    @classmethod
    def from_view(cls, view: PackageDiffView) -> PackageDiffType:
        return from_attributes(cls, view, changes=list(view.changes))
