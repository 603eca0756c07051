"""Read routes of packages and functions under the access policy. Publishing and executing
are other routes (other issues); a function is visible exactly when its package is."""

from __future__ import annotations

from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.functions.views import FunctionView
from calcgraph.domain.listing.paging import Page
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.views import PackageView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire import Page as PageOut
from calcgraph.rest_compat.wire import SearchQuery
from calcgraph.rest_compat.wire_packages import FunctionOut, PackageOut

rest = Operations(tag="packages")


@rest("GET", "/packages", {200: PageOut[PackageOut]})
async def list_packages(call: Call[None, SearchQuery]) -> Page[PackageView]:
    """Packages the caller can see"""
    query = call.query
    return await call.read(package_read_service.list_packages, query.page(), search=query.search)


@rest("GET", "/packages/{package_id}", {200: PackageOut})
async def get_package(call: Call[None, None]) -> PackageView:
    """A package"""
    return await call.read(package_read_service.get_package, call.path("package_id"))


@rest("GET", "/functions", {200: PageOut[FunctionOut]}, tag="functions")
async def list_functions(call: Call[None, SearchQuery]) -> Page[FunctionView]:
    """Functions the caller can see

    `search` matches a part of `package/name`."""
    query = call.query
    return await call.read(function_read_service.list_functions, query.page(), search=query.search)
