"""REST routes of the type catalog."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.domain.types.catalog import TypeDef
from calcgraph.domain.types.service import type_service
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import ConnectionOut, Page, TypeOut
from calcgraph.rest_compat.schemas import CheckConnectionBody


def type_json(t: TypeDef) -> dict[str, object]:
    return {
        "name": t.name,
        "parent": t.parent,
        "kind": t.kind,
        "unit": t.unit_symbol,
        "shape": t.shape,
        "description": t.description,
    }


async def list_types(request: Request) -> JSONResponse:
    return JSONResponse(
        {"items": [type_json(t) for t in type_service.list_types()], "next_cursor": None}
    )


async def check_connection(request: Request) -> JSONResponse:
    body = await parse_body(request, CheckConnectionBody)
    result = type_service.check_connection(body.source, body.target)
    return JSONResponse(
        {
            "compatibility": result.compatibility.verdict,
            "reason": result.compatibility.reason,
            "source": result.source,
            "target": result.target,
        }
    )


routes = [
    Route("/types", list_types, methods=["GET"]),
    Route("/types/check-connection", check_connection, methods=["POST"]),
]
operations = [
    Operation("GET", "/types", "The type catalog", {200: Page[TypeOut]}, tag="types"),
    Operation(
        "POST",
        "/types/check-connection",
        "May a source port feed a target port?",
        {200: ConnectionOut},
        body=CheckConnectionBody,
        tag="types",
    ),
]
