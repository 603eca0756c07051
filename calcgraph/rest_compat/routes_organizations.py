"""REST routes of organizations and their members (contract section 4)."""

from __future__ import annotations

from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import MemberView, OrganizationView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire_organizations import (
    AddMemberBody,
    CreateOrganizationBody,
    MemberOut,
    OrganizationOut,
)

rest = Operations(tag="organizations")


@rest("POST", "/organizations", {201: OrganizationOut}, errors=(409,))
async def create_organization(call: Call[CreateOrganizationBody, None]) -> OrganizationView:
    """Create an organization; the caller becomes its owner"""
    return await call.write(access_service.create_organization, call.body.slug, call.body.name)


@rest("GET", "/organizations/{slug}", {200: OrganizationOut}, errors=(403,))
async def get_organization(call: Call[None, None]) -> OrganizationView:
    """An organization and its members"""
    return await call.read(access_service.get_organization, call.path("slug"))


@rest("POST", "/organizations/{slug}/members", {201: MemberOut}, errors=(403, 409))
async def add_member(call: Call[AddMemberBody, None]) -> MemberView:
    """Add a member (owners and admins)"""
    return await call.write(
        access_service.add_member, call.path("slug"), call.body.username, call.body.role
    )


@rest("DELETE", "/organizations/{slug}/members/{username}", {204: None}, errors=(400, 403))
async def remove_member(call: Call[None, None]) -> None:
    """Remove a member (owners and admins)"""
    await call.write(access_service.remove_member, call.path("slug"), call.path("username"))
