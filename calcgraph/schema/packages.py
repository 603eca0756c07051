"""GraphQL types of the package catalogue: packages and functions (one module, as they point
at each other), their versions, the deployment report and the pages. Relations go through
the per-request loaders, hence the policy (see `schema.access`)."""

from __future__ import annotations

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
from calcgraph.schema.access import OrganizationType, loaders_of, principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.package_loaders import PackageLoaders
from calcgraph.schema.pages import Page
from calcgraph.schema.viewed import FromView, view_fields


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
@view_fields(
    {
        "id": "Immutable identifier; executes exactly it.",
        "function_id": "The function this is a version of.",
        "package_version_id": "The deployment that first carried it (its code comes from there).",
        "version": "MAJOR.MINOR.PATCH[-PRE].",
        "handler": "`<module>:<callable>`.",
        "code_checksum": "SHA-256 of the function's code.",
        "inputs_schema": "Typed inputs by port name.",
        "outputs_schema": "Typed outputs by port name.",
        "typed": "Typed I/O declared: usable as a workflow node.",
        "changelog": "Changes of this version.",
        "is_breaking_change": "Breaks callers of the previous.",
        "deprecated": "Deprecated by its author.",
        "deprecated_message": "What to use instead.",
        "removal_version": "Version that removes it.",
        "created_at": "Creation time.",
        "deployed_at": "First deployment time.",
        "resources": "Declared limits {memory_mb, cpus, timeout_s}; null: the worker's.",
    },
    id=strawberry.ID,
)
class FunctionVersionType(FromView[FunctionVersionView]):
    @strawberry.field(description="The function this is a version of.")
    async def function(self, info: Info) -> FunctionType | None:
        function = await loaders_of(info).function_by_id.load(self.view.function_id)
        return FunctionType.from_view(function) if function is not None else None

    @strawberry.field(description="Every version of the same function, oldest first.")
    async def versions(self, info: Info) -> list[FunctionVersionType]:
        rows = await package_loaders_of(info).function_versions_by_function_id.load(
            self.view.function_id
        )
        return [FunctionVersionType.from_view(v) for v in rows]


@strawberry.type(name="DeployedFunction", description="A function as one deployment carried it.")
@view_fields(
    {
        "name": "Function name.",
        "function_id": "Immutable function identifier.",
        "version": "The function version carried.",
        "version_id": "Identifier of that function version.",
        "status": "`new`, `updated` or `unchanged`.",
        "deployed_at": "Time of the deployment.",
    },
)
class DeployedFunctionType(FromView[DeployedFunctionView]):
    @strawberry.field(description="The immutable function version carried.")
    async def function_version(self, info: Info) -> FunctionVersionType | None:
        row = await package_loaders_of(info).function_version_by_id.load(self.view.version_id)
        return FunctionVersionType.from_view(row) if row is not None else None


@strawberry.type(name="PackageVersion", description="One deployment of a package.")
@view_fields(
    {
        "id": "Identifier.",
        "package_id": "The package.",
        "version": "Package version.",
        "git_ref": "Tag, branch or SHA deployed from git.",
        "git_commit": "Full SHA of the deployed commit.",
        "is_latest": "What unpinned calls run.",
        "is_stable": "False for a pre-release.",
        "changelog": "Changelog entry of this version.",
        "created_at": "Deployment time.",
        "functions": "The functions this deployment carried.",
    },
    id=strawberry.ID,
    functions=list[DeployedFunctionType],
)
class PackageVersionType(FromView[PackageVersionView]):
    pass


@strawberry.type(
    name="FunctionVersionEntry", description="A function version as one deployment carried it."
)
@view_fields(
    {
        "version": "Function version.",
        "version_id": "Identifier of the function version.",
        "deployed_at": "Time of the deployment.",
        "package_version": "Package version of the deployment.",
        "status": "`new`, `updated` or `unchanged`.",
        "changelog": "Changes of the function version.",
        "deprecated": "Deprecated by its author.",
        "is_breaking_change": "Breaks callers of the previous.",
    },
)
class FunctionVersionEntryType(FromView[FunctionVersionEntry]):
    pass


@strawberry.type(name="FunctionDeployment", description="One function of a deployment report.")
@view_fields(
    {
        "id": "Immutable function identifier.",
        "name": "Function name.",
        "version": "Function version after the deployment.",
        "version_id": "Identifier of that function version.",
        "checksum": "SHA-256 of the function's code.",
        "status": "`new`, `updated` or `unchanged`.",
        "changelog": "Changes of the function version.",
        "endpoint": "Path that executes exactly this version.",
        "is_breaking_change": "Breaks callers of the previous.",
        "breaking_reasons": "Why it is breaking.",
        "deprecated": "Deprecated by its author.",
    },
    id=str,
    endpoint=str,
)
class FunctionDeploymentType(FromView[FunctionDeployment]):
    @classmethod
    def from_view(cls, f: FunctionDeployment) -> FunctionDeploymentType:
        return cls.viewing(f, id=f.function_id, breaking_reasons=list(f.breaking_reasons))


@strawberry.type(
    name="FunctionBuild", description="A function built from submitted code (`POST /functions`)."
)
@view_fields(
    {
        "build_id": "The build's record.",
        "function_id": "The function (and its package's) id.",
        "status": "The build's status.",
        "docker_image": "The image built, if any.",
        "image_size_bytes": "Its size.",
        "build_seconds": "How long the build took.",
        "vulnerabilities": "The scan's findings by severity.",
        "function_version_id": "The version it made.",
        "version": "That version's number.",
        "version_status": "That version's status.",
        "package_version": "The package version.",
    },
)
class FunctionBuildType(FromView[BuildOutcome]):
    pass


@strawberry.type(name="DeploymentReport", description="What a deployment did (Versioning 8).")
@view_fields(
    {
        "package_id": "The package.",
        "package": "Package name.",
        "package_version": "The deployed package version.",
        "package_version_id": "Identifier of that deployment.",
        "is_latest": "Became the latest version.",
        "is_stable": "False for a pre-release.",
        "git_ref": "Ref deployed from git.",
        "git_commit": "Full SHA deployed from git.",
        "functions": "Per function.",
        "removed_functions": "Functions of earlier versions that this one no longer declares.",
        "warnings": "Things the author should know.",
        "breaking_changes": "Interface breaks against the current versions: function, change, "
        "port, breaking, reason.",
        "dependencies": "The declared dependencies as pinned: version by package name.",
        "dependency_closure": "Every package staged beside the code (the pins and what they "
        "brought along): version by package name.",
    },
    functions=list[FunctionDeploymentType],
    breaking_changes=JSON,
)
class DeploymentReportType(FromView[DeploymentReport]):
    @classmethod
    def from_view(cls, r: DeploymentReport) -> DeploymentReportType:
        return cls.viewing(
            r,
            removed_functions=list(r.removed_functions),
            warnings=list(r.warnings),
            breaking_changes=cast(JSON, list(r.breaking_changes)),
            dependencies=cast(JSON, dict(r.dependencies)),
            dependency_closure=cast(JSON, dict(r.dependency_closure)),
        )


@strawberry.type(name="Package", description="A package of functions.")
@view_fields(
    {
        "id": "Identifier.",
        "name": "Unique package name.",
        "visibility": "`private`, `internal` or `public`.",
        "owner": "Username of the owner.",
        "organization_slug": "Owning organization's slug.",
        "description": "What the package does.",
        "current_version": "Latest deployed version.",
        "created_at": "Creation time.",
        "updated_at": "Last change.",
    },
    organization_slug=str | None,
)
class PackageType(FromView[PackageView]):
    @strawberry.field(description="Functions of the package.")
    async def functions(self, info: Info) -> list[FunctionType]:
        rows = await loaders_of(info).functions_by_package_id.load(self.view.id)
        return [FunctionType.from_view(f) for f in rows]

    @strawberry.field(description="Every deployment of the package, oldest first.")
    async def versions(self, info: Info) -> list[PackageVersionType]:
        rows = await package_loaders_of(info).package_versions_by_package_id.load(self.view.id)
        return [PackageVersionType.from_view(v) for v in rows]

    @strawberry.field(description="The owning organization; PermissionDenied for non-members.")
    async def organization(self, info: Info) -> OrganizationType | None:
        if self.view.organization_id is None:
            return None
        org = await loaders_of(info).organization_by_id.load(self.view.organization_id)
        if org is None:
            raise PermissionDenied(
                f"you may not access organization {self.view.organization!r}: you are not a member"
            )
        return OrganizationType.from_view(org)

    @classmethod
    def from_view(cls, package: PackageView) -> PackageType:
        return cls.viewing(package, organization_slug=package.organization)


async def package_or_denied(info: Info, package_id: str) -> PackageType:
    """A non-null relation to a package: PermissionDenied when it is hidden."""
    package = await loaders_of(info).package_by_id.load(package_id)
    if package is None:
        raise PermissionDenied(f"you may not access package {package_id!r}")
    return PackageType.from_view(package)


@strawberry.type(name="Function", description="A function of a package.")
@view_fields(
    {
        "id": "Immutable identifier.",
        "name": "Name within its package.",
        "package_id": "Identifier of its package.",
        "current_version": "Current version.",
        "current_version_id": "Current version's id.",
        "created_at": "Creation time.",
    },
)
class FunctionType(FromView[FunctionView]):
    @strawberry.field(description="The package of the function.")
    async def package(self, info: Info) -> PackageType:
        return await package_or_denied(info, self.view.package_id)

    @strawberry.field(description="Every version of the function, oldest first.")
    async def versions(self, info: Info) -> list[FunctionVersionType]:
        rows = await package_loaders_of(info).function_versions_by_function_id.load(self.view.id)
        return [FunctionVersionType.from_view(v) for v in rows]


@strawberry.type(description="A page of packages.")
class PackagePage(Page[PackageType], items="Packages of this page."): ...


@strawberry.type(description="A page of functions.")
class FunctionPage(Page[FunctionType], items="Functions of this page."): ...


@strawberry.type(name="PackageVersionHistory", description="Every deployment of a package.")
@view_fields(
    {
        "package": "The package.",
        "current_version": "The latest version.",
        "versions": "Oldest first.",
    },
    package=PackageType,
    current_version=str | None,
    versions=list[PackageVersionType],
)
class PackageVersionHistoryType(FromView[PackageVersionsView]):
    @classmethod
    def from_view(cls, listing: PackageVersionsView) -> PackageVersionHistoryType:
        return cls.viewing(listing, current_version=listing.package.current_version)


@strawberry.type(
    name="FunctionVersionHistory",
    description="A function's versions, one entry per deployment that carried one.",
)
@view_fields(
    {
        "function": "The function.",
        "package": "Name of its package.",
        "current_version": "What unpinned calls run.",
        "versions": "Oldest first.",
    },
    function=FunctionType,
    package=str,
    current_version=str | None,
    versions=list[FunctionVersionEntryType],
)
class FunctionVersionHistoryType(FromView[FunctionVersionsView]):
    @classmethod
    def from_view(cls, listing: FunctionVersionsView) -> FunctionVersionHistoryType:
        function = listing.function
        return cls.viewing(
            listing, package=function.package, current_version=function.current_version
        )
