"""Publishing routes and version listings (spec: Versioned calls and version listings,
Versioning 7 and 8; contract 4). Each route parses, calls one service, serialises."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import (
    FunctionDetailView,
    FunctionVersionsView,
    FunctionVersionView,
)
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.domain.packages.views import (
    DeploymentReport,
    FunctionDeployment,
    PackageVersionsView,
    PackageVersionView,
)
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation, Query
from calcgraph.rest_compat.responses import (
    DeploymentReportOut,
    FunctionDetailOut,
    FunctionVersionsOut,
    PackageOut,
    PackageVersionsOut,
)
from calcgraph.rest_compat.routes_packages import function_json, package_json
from calcgraph.rest_compat.schemas import (
    PatchPackageBody,
    PublishFromGitBody,
    PublishPackageBody,
)
from calcgraph.rest_compat.state import database_of
from calcgraph.settings import Settings
from calcgraph.sources.git import GitSources


class FunctionVersionsQuery(Query):
    package: str | None = Field(
        default=None, description="package name, when the function name is not unique"
    )


def package_version_json(version: PackageVersionView) -> dict[str, Any]:
    return {
        "id": version.id,
        "package_id": version.package_id,
        "version": version.version,
        "deployed_at": version.created_at.isoformat(),
        "created_at": version.created_at.isoformat(),
        "git_ref": version.git_ref,
        "git_commit": version.git_commit,
        "is_latest": version.is_latest,
        "is_stable": version.is_stable,
        "changelog": version.changelog,
        "functions": [
            {
                "name": f.name,
                "version": f.version,
                "version_id": f.version_id,
                "function_id": f.function_id,
                "status": f.status,
            }
            for f in version.functions
        ],
    }


def package_versions_json(listing: PackageVersionsView) -> dict[str, Any]:
    return {
        "package": listing.package.name,
        "package_id": listing.package.id,
        "current_version": listing.package.current_version,
        "versions": [package_version_json(v) for v in listing.versions],
    }


def function_versions_json(listing: FunctionVersionsView) -> dict[str, Any]:
    return {
        "function": listing.function.name,
        "function_id": listing.function.id,
        "package": listing.function.package,
        "package_id": listing.function.package_id,
        "current_version": listing.function.current_version,
        "current_version_id": listing.function.current_version_id,
        "versions": [
            {
                "version": e.version,
                "version_id": e.version_id,
                "deployed_at": e.deployed_at.isoformat(),
                "package_version": e.package_version,
                "package_version_id": e.package_version_id,
                "status": e.status,
                "changelog": e.changelog,
                "deprecated": e.deprecated,
                "deprecated_message": e.deprecated_message,
                "is_breaking_change": e.is_breaking_change,
            }
            for e in listing.versions
        ],
    }


def function_version_json(version: FunctionVersionView) -> dict[str, Any]:
    return {
        "id": version.id,
        "function_id": version.function_id,
        "package_version_id": version.package_version_id,
        "version": version.version,
        "handler": version.handler,
        "code_checksum": version.code_checksum,
        "inputs_schema": version.inputs_schema,
        "outputs_schema": version.outputs_schema,
        "typed": version.typed,
        "changelog": version.changelog,
        "is_breaking_change": version.is_breaking_change,
        "deprecated": version.deprecated,
        "deprecated_message": version.deprecated_message,
        "removal_version": version.removal_version,
        "created_at": version.created_at.isoformat(),
        "deployed_at": version.deployed_at.isoformat(),
    }


def function_detail_json(detail: FunctionDetailView) -> dict[str, Any]:
    current = detail.current
    return {
        **function_json(detail.function),
        "current": function_version_json(current) if current is not None else None,
        "inputs": current.inputs_schema if current is not None else None,
        "outputs": current.outputs_schema if current is not None else None,
        "typed": current.typed if current is not None else False,
    }


def deployed_function_json(function: FunctionDeployment) -> dict[str, Any]:
    return {
        "id": function.function_id,
        "name": function.name,
        "version": function.version,
        "version_id": function.version_id,
        "checksum": function.checksum,
        "status": function.status,
        "changelog": function.changelog,
        "endpoint": function.endpoint,
        "is_breaking_change": function.is_breaking_change,
        "breaking_reasons": list(function.breaking_reasons),
        "deprecated": function.deprecated,
    }


def deployment_json(report: DeploymentReport) -> dict[str, Any]:
    return {
        "package_id": report.package_id,
        "package": report.package,
        "package_version": report.package_version,
        "package_version_id": report.package_version_id,
        "is_latest": report.is_latest,
        "is_stable": report.is_stable,
        "git_ref": report.git_ref,
        "git_commit": report.git_commit,
        "functions": [deployed_function_json(f) for f in report.functions],
        "removed_functions": list(report.removed_functions),
        "warnings": list(report.warnings),
    }


async def publish_package(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, PublishPackageBody)
    async with database_of(request).write_session() as session:
        report = await publishing_service.publish(
            session, principal, body.manifest, body.files, body.visibility, body.organization
        )
    return JSONResponse(deployment_json(report), status_code=201)


async def publish_from_git(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, PublishFromGitBody)
    settings: Settings = request.app.state.settings
    async with database_of(request).write_session() as session:
        report = await publishing_service.publish_from_git(
            session,
            principal,
            GitSources(settings),
            body.git_url,
            body.ref,
            body.visibility,
            body.organization,
        )
    return JSONResponse(deployment_json(report), status_code=201)


async def patch_package(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, PatchPackageBody)
    async with database_of(request).write_session() as session:
        package = await publishing_service.set_visibility(
            session, principal, request.path_params["package_id"], body.visibility
        )
    return JSONResponse(package_json(package))


async def package_versions(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        listing = await publishing_service.package_versions(
            session, principal, request.path_params["package_name"]
        )
    return JSONResponse(package_versions_json(listing))


async def function_versions(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        listing = await function_version_service.function_versions(
            session,
            principal,
            request.path_params["function_name"],
            request.query_params.get("package"),
        )
    return JSONResponse(function_versions_json(listing))


async def get_function(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        detail = await function_version_service.function_detail(
            session, principal, request.path_params["function_id"]
        )
    return JSONResponse(function_detail_json(detail))


routes = [
    Route("/packages", publish_package, methods=["POST"]),
    Route("/packages/from-git", publish_from_git, methods=["POST"]),
    Route("/packages/{package_id}", patch_package, methods=["PATCH"]),
    Route("/packages/{package_name}/versions", package_versions, methods=["GET"]),
    Route("/functions/{function_name}/versions", function_versions, methods=["GET"]),
    Route("/functions/{function_id}", get_function, methods=["GET"]),
]
operations = [
    Operation(
        "POST",
        "/packages",
        "Publish a package version from a manifest and files",
        {201: DeploymentReportOut},
        body=PublishPackageBody,
        errors=(400, 403, 404, 409),
        tag="packages",
    ),
    Operation(
        "POST",
        "/packages/from-git",
        "Publish a package version from a git repository",
        {201: DeploymentReportOut},
        body=PublishFromGitBody,
        errors=(400, 403, 404, 409),
        tag="packages",
    ),
    Operation(
        "PATCH",
        "/packages/{package_id}",
        "Change a package's visibility",
        {200: PackageOut},
        body=PatchPackageBody,
        errors=(403, 404),
        tag="packages",
    ),
    Operation(
        "GET",
        "/packages/{package_name}/versions",
        "Every deployment of a package, oldest first",
        {200: PackageVersionsOut},
        errors=(404,),
        tag="packages",
    ),
    Operation(
        "GET",
        "/functions/{function_name}/versions",
        "Every version of a function",
        {200: FunctionVersionsOut},
        query=FunctionVersionsQuery,
        errors=(404,),
        tag="functions",
    ),
    Operation(
        "GET",
        "/functions/{function_id}",
        "A function with its current version and typed I/O",
        {200: FunctionDetailOut},
        errors=(404,),
        tag="functions",
    ),
]
