"""Read routes of packages and functions under the access policy. Publishing and executing
are other routes (other issues); a function is visible exactly when its package is."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.domain.access.paging import PageRequest
from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.functions.views import FunctionView
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.views import PackageView
from calcgraph.rest_compat.operations import Operation, PageQuery
from calcgraph.rest_compat.responses import FunctionOut, PackageOut, Page
from calcgraph.rest_compat.state import database_of


def page_request(request: Request) -> PageRequest:
    return PageRequest.parse(request.query_params.get("limit"), request.query_params.get("cursor"))


def package_json(package: PackageView) -> dict[str, Any]:
    return {
        "id": package.id,
        "name": package.name,
        "visibility": package.visibility,
        "owner": package.owner,
        "organization": package.organization,
        "description": package.description,
        "current_version": package.current_version,
        "created_at": package.created_at.isoformat(),
        "updated_at": package.updated_at.isoformat(),
    }


def function_json(function: FunctionView) -> dict[str, Any]:
    return {
        "id": function.id,
        "name": function.name,
        "package_id": function.package_id,
        "package": function.package,
        "current_version": function.current_version,
        "current_version_id": function.current_version_id,
        "created_at": function.created_at.isoformat(),
    }


async def list_packages(request: Request) -> JSONResponse:
    principal = require_principal(request)
    page = page_request(request)
    async with database_of(request).read_session() as session:
        result = await package_read_service.list_packages(session, principal, page)
    return JSONResponse(
        {"items": [package_json(p) for p in result.items], "next_cursor": result.next_cursor}
    )


async def get_package(request: Request) -> JSONResponse:
    principal = require_principal(request)
    async with database_of(request).read_session() as session:
        package = await package_read_service.get_package(
            session, principal, request.path_params["package_id"]
        )
    return JSONResponse(package_json(package))


async def list_functions(request: Request) -> JSONResponse:
    principal = require_principal(request)
    page = page_request(request)
    async with database_of(request).read_session() as session:
        result = await function_read_service.list_functions(session, principal, page)
    return JSONResponse(
        {"items": [function_json(f) for f in result.items], "next_cursor": result.next_cursor}
    )


routes = [
    Route("/packages", list_packages, methods=["GET"]),
    Route("/packages/{package_id}", get_package, methods=["GET"]),
    Route("/functions", list_functions, methods=["GET"]),
]
operations = [
    Operation(
        "GET",
        "/packages",
        "Packages the caller can see",
        {200: Page[PackageOut]},
        query=PageQuery,
        tag="packages",
    ),
    Operation(
        "GET",
        "/packages/{package_id}",
        "A package",
        {200: PackageOut},
        errors=(404,),
        tag="packages",
    ),
    Operation(
        "GET",
        "/functions",
        "Functions the caller can see",
        {200: Page[FunctionOut]},
        query=PageQuery,
        tag="functions",
    ),
]
