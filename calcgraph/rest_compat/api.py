"""The REST door: every routes module once, in order. Its operations give the app its routes
and /openapi.json its document (a new routes module is added to MODULES, nowhere else)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import Route

from calcgraph.rest_compat import (
    routes_admin,
    routes_auth,
    routes_builds,
    routes_deployments,
    routes_events,
    routes_execute,
    routes_health,
    routes_jobs,
    routes_metrics,
    routes_organizations,
    routes_packages,
    routes_publish,
    routes_types,
    routes_webhooks,
    routes_workflows,
)
from calcgraph.rest_compat.openapi import build_document
from calcgraph.rest_compat.operations import Call, Operation, Operations

# The order of the routes (a path that two routes share answers 405 with the first one's
# methods) and of the document's paths.
MODULES = (
    routes_health,
    routes_metrics,
    routes_types,
    routes_auth,
    routes_organizations,
    routes_packages,
    routes_publish,
    routes_deployments,
    routes_jobs,
    routes_execute,
    routes_builds,
    routes_workflows,
    routes_events,
    routes_webhooks,
    routes_admin,
)

meta = Operations(tag="meta")


@meta("GET", "/openapi.json", {200: "application/json"})
async def openapi_json(call: Call[None, None]) -> JSONResponse:
    """This document (OpenAPI 3.1)"""
    return JSONResponse(document())


OPERATIONS: tuple[Operation, ...] = (
    *meta.declared,
    *(op for module in MODULES for op in module.rest.declared),
)


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    return build_document(OPERATIONS)


def routes() -> list[Route]:
    return [op.route() for op in OPERATIONS]
