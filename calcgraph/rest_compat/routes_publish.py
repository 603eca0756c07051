"""Publishing routes and version listings (spec: Versioned calls and version listings,
Versioning 7 and 8; contract 4). Each route parses, calls one service, serialises."""

from __future__ import annotations

from pydantic import Field

from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import FunctionDetailView, FunctionVersionsView
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.domain.packages.versions.service import package_version_service
from calcgraph.domain.packages.views import (
    DeploymentReport,
    PackageDiffView,
    PackageVersionDetailView,
    PackageVersionsView,
    PackageView,
)
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.parsing import Query
from calcgraph.rest_compat.wire_packages import PackageOut
from calcgraph.rest_compat.wire_publish import (
    DeploymentReportOut,
    FunctionDetailOut,
    FunctionVersionsOut,
    PackageDiffOut,
    PackageVersionDetailOut,
    PackageVersionsOut,
    PatchPackageBody,
    PublishFromGitBody,
    PublishPackageBody,
)


class FunctionVersionsQuery(Query):
    package: str | None = Field(
        default=None, description="package name, when the function name is not unique"
    )


rest = Operations(tag="packages")
_PUBLISH_ERRORS = (400, 403, 404, 409)


@rest("POST", "/packages", {201: DeploymentReportOut}, errors=_PUBLISH_ERRORS)
async def publish_package(call: Call[PublishPackageBody, None]) -> DeploymentReport:
    """Publish a package version from a manifest and files"""
    body = call.body
    return await call.write(
        publishing_service.publish, body.manifest, body.files, body.visibility, body.organization
    )


@rest("POST", "/packages/from-git", {201: DeploymentReportOut}, errors=_PUBLISH_ERRORS)
async def publish_from_git(call: Call[PublishFromGitBody, None]) -> DeploymentReport:
    """Publish a package version from a git repository"""
    body = call.body
    return await call.write(
        publishing_service.publish_from_git,
        call.services.sources,
        body.git_url,
        body.ref,
        body.visibility,
        body.organization,
    )


@rest("PATCH", "/packages/{package_id}", {200: PackageOut}, errors=(403,))
async def patch_package(call: Call[PatchPackageBody, None]) -> PackageView:
    """Change a package's visibility"""
    return await call.write(
        publishing_service.set_visibility, call.path("package_id"), call.body.visibility
    )


@rest("GET", "/packages/{package_name}/versions", {200: PackageVersionsOut})
async def package_versions(call: Call[None, None]) -> PackageVersionsView:
    """Every deployment of a package, oldest first"""
    return await call.read(publishing_service.package_versions, call.path("package_name"))


@rest("GET", "/functions/{function_name}/versions", {200: FunctionVersionsOut}, tag="functions")
async def function_versions(call: Call[None, FunctionVersionsQuery]) -> FunctionVersionsView:
    """Every version of a function"""
    return await call.read(
        function_version_service.function_versions, call.path("function_name"), call.query.package
    )


@rest("GET", "/functions/{function_id}", {200: FunctionDetailOut}, tag="functions")
async def get_function(call: Call[None, None]) -> FunctionDetailView:
    """A function with its current version and typed I/O"""
    return await call.read(function_version_service.function_detail, call.path("function_id"))


@rest("GET", "/packages/{package_id}/versions/{version}", {200: PackageVersionDetailOut})
async def package_version(call: Call[None, None]) -> PackageVersionDetailView:
    """One package version: compatibility, migration guide, changelog, function interfaces"""
    return await call.read(
        package_version_service.version_detail, call.path("package_id"), call.path("version")
    )


class DiffQuery(Query):
    from_version: str = Field(description="the older version (or `latest`)")
    to_version: str = Field(default="latest", description="the newer version (default: latest)")


@rest("GET", "/packages/{package_id}/diff", {200: PackageDiffOut})
async def package_diff(call: Call[None, DiffQuery]) -> PackageDiffView:
    """Interface changes between two versions of a package, breaking or not"""
    return await call.read(
        package_version_service.diff,
        call.path("package_id"),
        call.query.from_version,
        call.query.to_version,
    )
