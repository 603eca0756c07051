"""Query and mutation fields of the package lifecycle (contract 11): the same use cases as
the REST routes of `routes_deployments` and `routes_publish`."""

from __future__ import annotations

import strawberry

from calcgraph.domain.packages.deployments.service import deployment_service
from calcgraph.domain.packages.versions.service import package_version_service
from calcgraph.resolvers.unit import read, write
from calcgraph.schema.context import Info
from calcgraph.schema.deployments import (
    DeploymentStateType,
    PackageDiffType,
    PackageVersionDetailType,
)


@strawberry.type
class DeploymentQuery:
    @strawberry.field(description="Which version of a package (name or id) unpinned calls get.")
    async def package_deployment(self, info: Info, package: str) -> DeploymentStateType:
        return DeploymentStateType.from_view(await read(info, deployment_service.state, package))

    @strawberry.field(
        description="One package version (or `latest`): compatibility, migration guide, "
        "changelog, function interfaces."
    )
    async def package_version(
        self, info: Info, package: str, version: str
    ) -> PackageVersionDetailType:
        view = await read(info, package_version_service.version_detail, package, version)
        return PackageVersionDetailType.from_view(view)

    @strawberry.field(description="Interface changes between two versions of a package.")
    async def package_diff(
        self, info: Info, package: str, from_version: str, to_version: str = "latest"
    ) -> PackageDiffType:
        view = await read(info, package_version_service.diff, package, from_version, to_version)
        return PackageDiffType.from_view(view)


@strawberry.type
class DeploymentMutation:
    @strawberry.mutation(
        description="Make a hosted version current; owner, organization owners, admins."
    )
    async def promote_package_version(
        self, info: Info, package: str, version: str
    ) -> DeploymentStateType:
        view = await write(info, deployment_service.promote, package, version)
        return DeploymentStateType.from_view(view)

    @strawberry.mutation(
        description="Make the previous current version current again; owner, organization "
        "owners, admins."
    )
    async def rollback_package(self, info: Info, package: str) -> DeploymentStateType:
        return DeploymentStateType.from_view(
            await write(info, deployment_service.rollback, package)
        )
