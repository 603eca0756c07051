"""GraphQL types of the package catalogue: packages and functions (one module, as they point
at each other), their versions, the deployment report and the pages. Relations go through
the per-request loaders, hence the policy (see `schema.access`)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import cast

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.builds.service import BuildOutcome
from calcgraph.domain.errors import PermissionDenied
from calcgraph.domain.functions.views import (
    FunctionVersionEntry,
    FunctionVersionsView,
    FunctionVersionView,
    FunctionView,
)
from calcgraph.domain.packages.views import (
    DeployedFunctionView,
    DeploymentReport,
    FunctionDeployment,
    PackageVersionsView,
    PackageVersionView,
    PackageView,
)
from calcgraph.domain.read_models import from_attributes
from calcgraph.schema.access import OrganizationType, loaders_of, principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.package_loaders import PackageLoaders
from calcgraph.schema.pages import Page
from calcgraph.schema.viewed import FromView


def package_loaders_of(info: Info) -> PackageLoaders:
    """Built on first use in a request (the context is per request), for its principal."""
    principal = principal_of(info)
    if info.context.package_loaders is None:
        info.context.package_loaders = PackageLoaders.build(info.context.database, principal)
    return info.context.package_loaders


@strawberry.enum(description="Who may see a package.")
class Visibility(Enum):
    private = "private"
    internal = "internal"
    public = "public"


def visibility_value(visibility: Visibility | None) -> str | None:
    """The services' spelling of an optional `Visibility` argument (None: the default)."""
    return visibility.value if visibility is not None else None


@strawberry.type(name="FunctionVersion", description="An immutable version of a function.")
class FunctionVersionType(FromView[FunctionVersionView]):
    id: strawberry.ID = strawberry.field(description="Immutable identifier; executes exactly it.")
    function_id: str = strawberry.field(description="The function this is a version of.")
    package_version_id: str = strawberry.field(
        description="The deployment that first carried it (its code comes from there)."
    )
    version: str = strawberry.field(description="MAJOR.MINOR.PATCH[-PRE].")
    handler: str = strawberry.field(description="`<module>:<callable>`.")
    code_checksum: str = strawberry.field(description="SHA-256 of the function's code.")
    inputs_schema: JSON | None = strawberry.field(description="Typed inputs by port name.")
    outputs_schema: JSON | None = strawberry.field(description="Typed outputs by port name.")
    typed: bool = strawberry.field(description="Typed I/O declared: usable as a workflow node.")
    changelog: str | None = strawberry.field(description="Changes of this version.")
    is_breaking_change: bool = strawberry.field(description="Breaks callers of the previous.")
    deprecated: bool = strawberry.field(description="Deprecated by its author.")
    deprecated_message: str | None = strawberry.field(description="What to use instead.")
    removal_version: str | None = strawberry.field(description="Version that removes it.")
    created_at: datetime = strawberry.field(description="Creation time.")
    deployed_at: datetime = strawberry.field(description="First deployment time.")
    resources: JSON | None = strawberry.field(
        description="Declared limits {memory_mb, cpus, timeout_s}; null: the worker's."
    )

    @strawberry.field(description="The function this is a version of.")
    async def function(self, info: Info) -> FunctionType | None:
        function = await loaders_of(info).function_by_id.load(self.function_id)
        return FunctionType.from_view(function) if function is not None else None

    @strawberry.field(description="Every version of the same function, oldest first.")
    async def versions(self, info: Info) -> list[FunctionVersionType]:
        rows = await package_loaders_of(info).function_versions_by_function_id.load(
            self.function_id
        )
        return [FunctionVersionType.from_view(v) for v in rows]


@strawberry.type(name="DeployedFunction", description="A function as one deployment carried it.")
class DeployedFunctionType(FromView[DeployedFunctionView]):
    name: str = strawberry.field(description="Function name.")
    function_id: str = strawberry.field(description="Immutable function identifier.")
    version: str = strawberry.field(description="The function version carried.")
    version_id: str = strawberry.field(description="Identifier of that function version.")
    status: str = strawberry.field(description="`new`, `updated` or `unchanged`.")
    deployed_at: datetime = strawberry.field(description="Time of the deployment.")

    @strawberry.field(description="The immutable function version carried.")
    async def function_version(self, info: Info) -> FunctionVersionType | None:
        row = await package_loaders_of(info).function_version_by_id.load(self.version_id)
        return FunctionVersionType.from_view(row) if row is not None else None


@strawberry.type(name="PackageVersion", description="One deployment of a package.")
class PackageVersionType:
    id: strawberry.ID = strawberry.field(description="Identifier.")
    package_id: str = strawberry.field(description="The package.")
    version: str = strawberry.field(description="Package version.")
    git_ref: str | None = strawberry.field(description="Tag, branch or SHA deployed from git.")
    git_commit: str | None = strawberry.field(description="Full SHA of the deployed commit.")
    is_latest: bool = strawberry.field(description="What unpinned calls run.")
    is_stable: bool = strawberry.field(description="False for a pre-release.")
    changelog: JSON | None = strawberry.field(description="Changelog entry of this version.")
    created_at: datetime = strawberry.field(description="Deployment time.")
    functions: list[DeployedFunctionType] = strawberry.field(
        description="The functions this deployment carried."
    )

    @classmethod
    def from_view(cls, v: PackageVersionView) -> PackageVersionType:
        return from_attributes(
            cls, v, functions=[DeployedFunctionType.from_view(f) for f in v.functions]
        )


@strawberry.type(name="PackageVersionHistory", description="Every deployment of a package.")
class PackageVersionHistoryType:
    package: PackageType = strawberry.field(description="The package.")
    current_version: str | None = strawberry.field(description="The latest version.")
    versions: list[PackageVersionType] = strawberry.field(description="Oldest first.")

    @classmethod
    def from_view(cls, listing: PackageVersionsView) -> PackageVersionHistoryType:
        return cls(
            package=PackageType.from_view(listing.package),
            current_version=listing.package.current_version,
            versions=[PackageVersionType.from_view(v) for v in listing.versions],
        )


@strawberry.type(
    name="FunctionVersionEntry", description="A function version as one deployment carried it."
)
class FunctionVersionEntryType(FromView[FunctionVersionEntry]):
    version: str = strawberry.field(description="Function version.")
    version_id: str = strawberry.field(description="Identifier of the function version.")
    deployed_at: datetime = strawberry.field(description="Time of the deployment.")
    package_version: str = strawberry.field(description="Package version of the deployment.")
    status: str = strawberry.field(description="`new`, `updated` or `unchanged`.")
    changelog: str | None = strawberry.field(description="Changes of the function version.")
    deprecated: bool = strawberry.field(description="Deprecated by its author.")
    is_breaking_change: bool = strawberry.field(description="Breaks callers of the previous.")


@strawberry.type(
    name="FunctionVersionHistory",
    description="A function's versions, one entry per deployment that carried one.",
)
class FunctionVersionHistoryType:
    function: FunctionType = strawberry.field(description="The function.")
    package: str = strawberry.field(description="Name of its package.")
    current_version: str | None = strawberry.field(description="What unpinned calls run.")
    versions: list[FunctionVersionEntryType] = strawberry.field(description="Oldest first.")

    @classmethod
    def from_view(cls, listing: FunctionVersionsView) -> FunctionVersionHistoryType:
        return cls(
            function=FunctionType.from_view(listing.function),
            package=listing.function.package,
            current_version=listing.function.current_version,
            versions=[FunctionVersionEntryType.from_view(e) for e in listing.versions],
        )


@strawberry.type(name="FunctionDeployment", description="One function of a deployment report.")
class FunctionDeploymentType:
    id: str = strawberry.field(description="Immutable function identifier.")
    name: str = strawberry.field(description="Function name.")
    version: str = strawberry.field(description="Function version after the deployment.")
    version_id: str = strawberry.field(description="Identifier of that function version.")
    checksum: str = strawberry.field(description="SHA-256 of the function's code.")
    status: str = strawberry.field(description="`new`, `updated` or `unchanged`.")
    changelog: str | None = strawberry.field(description="Changes of the function version.")
    endpoint: str = strawberry.field(description="Path that executes exactly this version.")
    is_breaking_change: bool = strawberry.field(description="Breaks callers of the previous.")
    breaking_reasons: list[str] = strawberry.field(description="Why it is breaking.")
    deprecated: bool = strawberry.field(description="Deprecated by its author.")

    @classmethod
    def from_view(cls, f: FunctionDeployment) -> FunctionDeploymentType:
        return from_attributes(cls, f, id=f.function_id, breaking_reasons=list(f.breaking_reasons))


@strawberry.type(
    name="FunctionBuild", description="A function built from submitted code (`POST /functions`)."
)
class FunctionBuildType:
    build_id: str = strawberry.field(description="The build's record.")
    function_id: str = strawberry.field(description="The function (and its package's) id.")
    status: str = strawberry.field(description="The build's status.")
    docker_image: str | None = strawberry.field(description="The image built, if any.")
    image_size_bytes: int | None = strawberry.field(description="Its size.")
    build_seconds: float = strawberry.field(description="How long the build took.")
    vulnerabilities: JSON = strawberry.field(description="The scan's findings by severity.")
    function_version_id: str | None = strawberry.field(description="The version it made.")
    version: str | None = strawberry.field(description="That version's number.")
    version_status: str | None = strawberry.field(description="That version's status.")
    package_version: str | None = strawberry.field(description="The package version.")

    @classmethod
    def from_outcome(cls, outcome: BuildOutcome) -> FunctionBuildType:
        return from_attributes(cls, outcome)


@strawberry.type(name="DeploymentReport", description="What a deployment did (Versioning 8).")
class DeploymentReportType:
    package_id: str = strawberry.field(description="The package.")
    package: str = strawberry.field(description="Package name.")
    package_version: str = strawberry.field(description="The deployed package version.")
    package_version_id: str = strawberry.field(description="Identifier of that deployment.")
    is_latest: bool = strawberry.field(description="Became the latest version.")
    is_stable: bool = strawberry.field(description="False for a pre-release.")
    git_ref: str | None = strawberry.field(description="Ref deployed from git.")
    git_commit: str | None = strawberry.field(description="Full SHA deployed from git.")
    functions: list[FunctionDeploymentType] = strawberry.field(description="Per function.")
    removed_functions: list[str] = strawberry.field(
        description="Functions of earlier versions that this one no longer declares."
    )
    warnings: list[str] = strawberry.field(description="Things the author should know.")
    breaking_changes: JSON = strawberry.field(
        description="Interface breaks against the current versions: function, change, port, "
        "breaking, reason."
    )
    dependencies: JSON = strawberry.field(
        description="The declared dependencies as pinned: version by package name."
    )
    dependency_closure: JSON = strawberry.field(
        description="Every package staged beside the code (the pins and what they brought "
        "along): version by package name."
    )

    @classmethod
    def from_view(cls, r: DeploymentReport) -> DeploymentReportType:
        return from_attributes(
            cls,
            r,
            functions=[FunctionDeploymentType.from_view(f) for f in r.functions],
            removed_functions=list(r.removed_functions),
            warnings=list(r.warnings),
            breaking_changes=cast(JSON, list(r.breaking_changes)),
            dependencies=cast(JSON, dict(r.dependencies)),
            dependency_closure=cast(JSON, dict(r.dependency_closure)),
        )


@strawberry.type(name="Package", description="A package of functions.")
class PackageType:
    id: str = strawberry.field(description="Identifier.")
    name: str = strawberry.field(description="Unique package name.")
    visibility: str = strawberry.field(description="`private`, `internal` or `public`.")
    owner: str = strawberry.field(description="Username of the owner.")
    organization_slug: str | None = strawberry.field(description="Owning organization's slug.")
    description: str | None = strawberry.field(description="What the package does.")
    current_version: str | None = strawberry.field(description="Latest deployed version.")
    created_at: datetime = strawberry.field(description="Creation time.")
    updated_at: datetime = strawberry.field(description="Last change.")
    organization_id: strawberry.Private[str | None]

    @strawberry.field(description="Functions of the package.")
    async def functions(self, info: Info) -> list[FunctionType]:
        rows = await loaders_of(info).functions_by_package_id.load(self.id)
        return [FunctionType.from_view(f) for f in rows]

    @strawberry.field(description="Every deployment of the package, oldest first.")
    async def versions(self, info: Info) -> list[PackageVersionType]:
        rows = await package_loaders_of(info).package_versions_by_package_id.load(self.id)
        return [PackageVersionType.from_view(v) for v in rows]

    @strawberry.field(description="The owning organization; PermissionDenied for non-members.")
    async def organization(self, info: Info) -> OrganizationType | None:
        if self.organization_id is None:
            return None
        org = await loaders_of(info).organization_by_id.load(self.organization_id)
        if org is None:
            raise PermissionDenied(
                f"you may not access organization {self.organization_slug!r}: you are not a member"
            )
        return OrganizationType.from_view(org)

    @classmethod
    def from_view(cls, package: PackageView) -> PackageType:
        return from_attributes(cls, package, organization_slug=package.organization)


async def package_or_denied(info: Info, package_id: str) -> PackageType:
    """A non-null relation to a package: PermissionDenied when it is hidden."""
    package = await loaders_of(info).package_by_id.load(package_id)
    if package is None:
        raise PermissionDenied(f"you may not access package {package_id!r}")
    return PackageType.from_view(package)


@strawberry.type(name="Function", description="A function of a package.")
class FunctionType(FromView[FunctionView]):
    id: str = strawberry.field(description="Immutable identifier.")
    name: str = strawberry.field(description="Name within its package.")
    package_id: str = strawberry.field(description="Identifier of its package.")
    current_version: str | None = strawberry.field(description="Current version.")
    current_version_id: str | None = strawberry.field(description="Current version's id.")
    created_at: datetime = strawberry.field(description="Creation time.")

    @strawberry.field(description="The package of the function.")
    async def package(self, info: Info) -> PackageType:
        return await package_or_denied(info, self.package_id)

    @strawberry.field(description="Every version of the function, oldest first.")
    async def versions(self, info: Info) -> list[FunctionVersionType]:
        rows = await package_loaders_of(info).function_versions_by_function_id.load(self.id)
        return [FunctionVersionType.from_view(v) for v in rows]


@strawberry.type(description="A page of packages.")
class PackagePage(Page[PackageType]):
    items: list[PackageType] = strawberry.field(description="Packages of this page.")


@strawberry.type(description="A page of functions.")
class FunctionPage(Page[FunctionType]):
    items: list[FunctionType] = strawberry.field(description="Functions of this page.")
