"""Query and mutation fields of publishing, versions and addressing: thin calls into the
publishing and function-version services."""

from __future__ import annotations

from typing import Any, Unpack

import strawberry
from strawberry.scalars import JSON

from calcgraph.domain.builds.service import FunctionSubmission, build_service
from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.resolvers.arguments import Owned, arguments, owner
from calcgraph.resolvers.unit import read, write
from calcgraph.schema.access import principal_of
from calcgraph.schema.context import Info
from calcgraph.schema.packages import (
    DeploymentReportType,
    FunctionBuildType,
    FunctionVersionHistoryType,
    FunctionVersionType,
    PackageType,
    PackageVersionHistoryType,
    Visibility,
)


def _files(files: Any) -> dict[str, str]:
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise ValidationError(
            "files is invalid",
            [FieldError(("files",), "an object mapping each path to its source text")],
        )
    return files


def _manifest(info: Info, manifest: Any) -> dict[str, Any] | str:
    principal_of(info)  # a caller without a token hears that before any refusal of its input
    if not isinstance(manifest, dict | str):
        raise ValidationError(
            "manifest is invalid",
            [FieldError(("manifest",), "calcgraph.yaml as an object or as YAML text")],
        )
    return manifest


def _function_name(name: str) -> str:
    if not 1 <= len(name) <= 100:
        raise ValidationError(
            "name must be 1 to 100 characters", [FieldError(("name",), "1 to 100 characters")]
        )
    return name


def _ports(ports: Any, name: str) -> dict[str, Any] | None:
    if ports is not None and not isinstance(ports, dict):
        raise ValidationError(
            f"{name} is invalid", [FieldError((name,), "an object of typed ports, by name")]
        )
    return ports


@strawberry.type
class PackageQuery:
    @strawberry.field(description="Every deployment of a package (name or id), oldest first.")
    async def package_versions(self, info: Info, package: str) -> PackageVersionHistoryType:
        listing = await read(info, publishing_service.package_versions, package)
        return PackageVersionHistoryType.from_view(listing)

    @strawberry.field(
        description="A function's versions, one entry per deployment; `package` picks one "
        "when the name is in several packages."
    )
    async def function_versions(
        self, info: Info, function: str, package: str | None = None
    ) -> FunctionVersionHistoryType:
        listing = await read(info, function_version_service.function_versions, function, package)
        return FunctionVersionHistoryType.from_view(listing)

    @strawberry.field(
        description="The one function version a reference addresses: `package/function`, "
        "`package/function@version` (`@latest` allowed), or a function or version id."
    )
    async def resolve_function(self, info: Info, reference: str) -> FunctionVersionType:
        resolved = await read(info, function_version_service.resolve_reference, reference)
        return FunctionVersionType.from_view(resolved.version)


@strawberry.type
class PackageMutation:
    @strawberry.mutation(description="Publish a package version from a manifest and its files.")
    @arguments(Owned)
    async def publish_package(
        self, info: Info, manifest: JSON, files: JSON, **owned: Unpack[Owned]
    ) -> DeploymentReportType:
        source = _manifest(info, manifest), _files(files)
        report = await write(info, publishing_service.publish, *source, *owner(owned))
        return DeploymentReportType.from_view(report)

    @strawberry.mutation(
        description="Publish a package version from a git tag, branch or commit SHA."
    )
    @arguments(Owned)
    async def publish_package_from_git(
        self, info: Info, git_url: str, ref: str, **owned: Unpack[Owned]
    ) -> DeploymentReportType:
        sources = info.context.services.sources
        publish = publishing_service.publish_from_git
        report = await write(info, publish, sources, git_url, ref, *owner(owned))
        return DeploymentReportType.from_view(report)

    @strawberry.mutation(
        description="Build a function from submitted code (REST `POST /functions`): a package "
        "of one function. A refusal at validation is a `ValidationError` naming the rule and "
        "line (`extensions.errors`); at the scan an `InvalidRequest` with "
        "`extensions.vulnerabilities`; either keeps its build record."
    )
    @arguments(Owned)
    async def submit_function(
        self,
        info: Info,
        name: str,
        code: str,
        requirements: list[str] | None = None,
        handler: str = "main:main",
        inputs: JSON | None = None,
        outputs: JSON | None = None,
        **owned: Unpack[Owned],
    ) -> FunctionBuildType:
        principal_of(info)
        visibility, organization = owner(owned)
        submission = FunctionSubmission(
            name=_function_name(name),
            code=code,
            requirements=tuple(requirements or ()),
            handler=handler,
            inputs=_ports(inputs, "inputs"),
            outputs=_ports(outputs, "outputs"),
            visibility=visibility,
            organization=organization,
        )
        services = info.context.services
        outcome = await write(
            info,
            build_service.submit,
            services.settings.submission_limits,
            services.builds,
            submission,
        )
        # Raised after the commit: a refused build keeps its record and its reason.
        if outcome.refusal is not None:
            raise outcome.refusal
        return FunctionBuildType.from_view(outcome)

    @strawberry.mutation(
        description="Change a package's visibility; owner, organization owners, admins."
    )
    async def set_package_visibility(
        self, info: Info, package: str, visibility: Visibility
    ) -> PackageType:
        view = await write(info, publishing_service.set_visibility, package, visibility.value)
        return PackageType.from_view(view)
