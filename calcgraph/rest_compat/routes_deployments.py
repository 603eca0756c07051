"""Which version of a package unpinned calls get (contract 11): its deployment state and
history, promote and roll back. Each route parses, calls one service, serialises."""

from __future__ import annotations

from calcgraph.domain.packages.deployments.service import deployment_service
from calcgraph.domain.packages.views import DeploymentStateView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire_deployments import DeploymentStateOut

rest = Operations(tag="packages")


@rest("GET", "/packages/{package_id}/deployment", {200: DeploymentStateOut})
async def get_deployment(call: Call[None, None]) -> DeploymentStateView:
    """A package's deployment: strategy, current version, candidate, history"""
    return await call.read(deployment_service.state, call.path("package_id"))


@rest(
    "POST",
    "/packages/{package_id}/versions/{version}/promote",
    {200: DeploymentStateOut},
    errors=(403, 409),
)
async def promote(call: Call[None, None]) -> DeploymentStateView:
    """Make a hosted version current (blue-green); owner, organization owners, admins"""
    return await call.write(
        deployment_service.promote, call.path("package_id"), call.path("version")
    )


@rest("POST", "/packages/{package_id}/rollback", {200: DeploymentStateOut}, errors=(403, 409))
async def rollback(call: Call[None, None]) -> DeploymentStateView:
    """Make the previous current version current again; owner, organization owners, admins"""
    return await call.write(deployment_service.rollback, call.path("package_id"))
