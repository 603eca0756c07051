"""REST routes of the type catalog."""

from __future__ import annotations

from calcgraph.domain.listing.paging import Page
from calcgraph.domain.types.catalog import TypeDef
from calcgraph.domain.types.service import ConnectionCheck, type_service
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire import Page as PageOut
from calcgraph.rest_compat.wire_types import CheckConnectionBody, ConnectionOut, TypeOut

rest = Operations(tag="types")


@rest("GET", "/types", {200: PageOut[TypeOut]})
async def list_types(call: Call[None, None]) -> Page[TypeDef]:
    """The type catalog"""
    return Page(type_service.list_types(), next_cursor=None)


@rest("POST", "/types/check-connection", {200: ConnectionOut})
async def check_connection(call: Call[CheckConnectionBody, None]) -> ConnectionCheck:
    """May a source port feed a target port?"""
    return type_service.check_connection(call.body.source, call.body.target)
