"""Bodies and answers of the publishing routes and version listings (contract 4 and
11): each answer with a domain view writes it as it is (`as_viewed`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasPath, ConfigDict, Field

from calcgraph.domain.functions.views import (
    FunctionDetailView,
    FunctionVersionEntry,
    FunctionVersionView,
)
from calcgraph.domain.packages.views import (
    DeploymentReport,
    FunctionInterfaceView,
    PackageVersionDetailView,
    PinnedDependencyView,
)
from calcgraph.rest_compat.wire import (
    Body,
    OrganizationSlug,
    Out,
    Timestamp,
    VisibilityValue,
    as_viewed,
    read_from,
    view_attributes,
)
from calcgraph.rest_compat.wire_packages import FunctionOut

# Examples of the OpenAPI document; tests/openapi sends each to its route.
BEAM_SOURCE = "def cantilever(length, force):\n    return {'moment': force * length}\n"

_PACKAGE_EXAMPLE: dict[str, Any] = {
    "manifest": {
        "kind": "package",
        "version": 1,
        "package": {"name": "beam-tools", "version": "1.0.0", "versioning_strategy": "auto"},
        "functions": {
            "cantilever": {
                "handler": "beam:cantilever",
                "inputs": {
                    "length": {"type": "Length", "description": "span", "required": True},
                    "force": {"type": "Force", "description": "tip load", "required": True},
                },
                "outputs": {"moment": {"type": "Moment", "description": "root moment"}},
            }
        },
    },
    "files": {"beam.py": BEAM_SOURCE},
    "visibility": "private",
}


class FunctionVersionOut(Out):
    __annotations__ = as_viewed(FunctionVersionView)


def _function_detail(detail: FunctionDetailView) -> dict[str, Any]:
    current = detail.current
    return {
        **view_attributes(detail.function),
        "current": current,
        "inputs": current.inputs_schema if current is not None else None,
        "outputs": current.outputs_schema if current is not None else None,
        "typed": current.typed if current is not None else False,
    }


class FunctionDetailOut(FunctionOut):
    current: FunctionVersionOut | None
    inputs: dict[str, Any] | None
    outputs: dict[str, Any] | None
    typed: bool

    _from_view = read_from(FunctionDetailView, _function_detail)


class FunctionVersionEntryOut(Out):
    __annotations__ = as_viewed(FunctionVersionEntry)


class FunctionVersionsOut(Out):
    function: str = Field(validation_alias=AliasPath("function", "name"))
    function_id: str = Field(validation_alias=AliasPath("function", "id"))
    package: str = Field(validation_alias=AliasPath("function", "package"))
    package_id: str = Field(validation_alias=AliasPath("function", "package_id"))
    current_version: str | None = Field(validation_alias=AliasPath("function", "current_version"))
    current_version_id: str | None = Field(
        validation_alias=AliasPath("function", "current_version_id")
    )
    versions: list[FunctionVersionEntryOut]


class DeployedFunctionOut(Out):
    name: str
    version: str
    version_id: str
    function_id: str
    status: str


class PackageVersionOut(Out):
    id: str
    package_id: str
    version: str
    deployed_at: Timestamp = Field(validation_alias=AliasPath("created_at"))
    created_at: Timestamp
    git_ref: str | None
    git_commit: str | None
    is_latest: bool
    is_stable: bool
    changelog: dict[str, Any] | None
    functions: list[DeployedFunctionOut]


class PackageVersionsOut(Out):
    package: str = Field(validation_alias=AliasPath("package", "name"))
    package_id: str = Field(validation_alias=AliasPath("package", "id"))
    current_version: str | None = Field(validation_alias=AliasPath("package", "current_version"))
    versions: list[PackageVersionOut]


class FunctionDeploymentOut(Out):
    id: str = Field(validation_alias="function_id")
    name: str
    version: str
    version_id: str
    checksum: str
    status: str
    changelog: str | None
    endpoint: str = Field(description="execute path pinned to this function version")
    is_breaking_change: bool
    breaking_reasons: list[str]
    deprecated: bool


class DeploymentReportOut(Out):
    """Specification, Versioning 8, plus `package_id`."""

    __annotations__ = as_viewed(DeploymentReport, functions=list[FunctionDeploymentOut])


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


PackageVisibility = Annotated[
    VisibilityValue | None,
    Field(description="new package: default private; existing: unchanged if unset"),
]


class PublishPackageBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [_PACKAGE_EXAMPLE]})

    manifest: dict[str, Any] | str = Field(
        description="calcgraph.yaml as an object (its JSON form) or as YAML text"
    )
    files: dict[str, str] = Field(description="path of each package file to its source text")
    visibility: PackageVisibility = None
    organization: OrganizationSlug = None


class PublishFromGitBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "git_url": "https://git.example.org/acme/beam-tools.git",
                    "ref": "v1.2.0",
                    "visibility": "internal",
                }
            ]
        }
    )

    git_url: str = Field(
        min_length=1,
        max_length=2048,
        description="https:// URL, or a file:// URL or path inside CALCGRAPH_GIT_LOCAL_ROOTS",
    )
    ref: str = Field(min_length=1, max_length=255, description="tag, branch or commit SHA")
    visibility: PackageVisibility = None
    organization: OrganizationSlug = None


class PatchPackageBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"visibility": "internal"}]})

    visibility: VisibilityValue = Field(description="private, internal or public")
