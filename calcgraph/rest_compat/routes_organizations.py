"""REST routes of organizations and their members (contract section 4)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import MemberView, OrganizationView
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import MemberOut, OrganizationOut
from calcgraph.rest_compat.schemas import AddMemberBody, CreateOrganizationBody
from calcgraph.rest_compat.state import database_of


def member_json(member: MemberView) -> dict[str, Any]:
    return {"username": member.username, "role": member.role}


def organization_json(org: OrganizationView) -> dict[str, Any]:
    return {
        "id": org.id,
        "slug": org.slug,
        "name": org.name,
        "created_at": org.created_at.isoformat(),
        "members": [member_json(m) for m in org.members],
    }


async def create_organization(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, CreateOrganizationBody)
    async with database_of(request).write_session() as session:
        org = await access_service.create_organization(session, principal, body.slug, body.name)
    return JSONResponse(organization_json(org), status_code=201)


async def get_organization(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        org = await access_service.get_organization(session, principal, request.path_params["slug"])
    return JSONResponse(organization_json(org))


async def add_member(request: Request) -> JSONResponse:
    principal = require_principal(request)
    body = await parse_body(request, AddMemberBody)
    async with database_of(request).write_session() as session:
        member = await access_service.add_member(
            session, principal, request.path_params["slug"], body.username, body.role
        )
    return JSONResponse(member_json(member), status_code=201)


async def remove_member(request: Request) -> Response:
    principal = require_principal(request)
    async with database_of(request).write_session() as session:
        await access_service.remove_member(
            session, principal, request.path_params["slug"], request.path_params["username"]
        )
    return Response(status_code=204)


routes = [
    Route("/organizations", create_organization, methods=["POST"]),
    Route("/organizations/{slug}", get_organization, methods=["GET"]),
    Route("/organizations/{slug}/members", add_member, methods=["POST"]),
    Route("/organizations/{slug}/members/{username}", remove_member, methods=["DELETE"]),
]
operations = [
    Operation(
        "POST",
        "/organizations",
        "Create an organization; the caller becomes its owner",
        {201: OrganizationOut},
        body=CreateOrganizationBody,
        errors=(409,),
        tag="organizations",
    ),
    Operation(
        "GET",
        "/organizations/{slug}",
        "An organization and its members",
        {200: OrganizationOut},
        errors=(403, 404),
        tag="organizations",
    ),
    Operation(
        "POST",
        "/organizations/{slug}/members",
        "Add a member (owners and admins)",
        {201: MemberOut},
        body=AddMemberBody,
        errors=(403, 404, 409),
        tag="organizations",
    ),
    Operation(
        "DELETE",
        "/organizations/{slug}/members/{username}",
        "Remove a member (owners and admins)",
        {204: None},
        errors=(400, 403, 404),
        tag="organizations",
    ),
]
