"""The OpenAPI 3.1 document of the REST door, built from the declared operations (see
rest_compat.operations) and the pydantic models they parse and answer with; rest_compat.api
serves it at GET /openapi.json."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from calcgraph import __version__
from calcgraph.rest_compat.middleware import API_PREFIX, VENDOR_MEDIA_TYPE
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.wire import ErrorBody

REF = "#/components/schemas/{model}"
JSON_TYPES = ("application/json", VENDOR_MEDIA_TYPE)
_PATH_PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")

# Contract section 2. Every route may answer 406 (Accept), 429 (rate limit), 500 and 503
# (database busy).
ERROR_TEXT = {
    400: "InvalidRequest: the request parses but breaks a rule",
    401: "Unauthenticated: missing or invalid bearer token (header WWW-Authenticate: Bearer)",
    403: "PermissionDenied",
    404: "NotFound: unknown identifier, slug, name or version",
    406: "NotAcceptable: Accept names only another vendor media type",
    409: "Conflict",
    413: "PayloadTooLarge: body over the configured limit",
    422: "ValidationError: body, query or inputs do not match their schema",
    429: "RateLimited (header Retry-After) or QuotaExceeded (Retry-After when waiting helps)",
    500: "InternalError: never carries internal detail",
    503: "Unavailable: the database is busy; retry (header Retry-After)",
}
COMMON_ERRORS = (406, 429, 500, 503)


def _models(operations: Iterable[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {
        (ErrorBody, "serialization"): None
    }
    for op in operations:
        if op.body is not None:
            wanted[(op.body, "validation")] = None
        for answer in op.answers.values():
            if isinstance(answer, type):
                wanted[(answer, "serialization")] = None
    return list(wanted)


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {media: {"schema": schema} for media in JSON_TYPES}


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent rather than null: drop pydantic's null branch."""
    schema = {k: v for k, v in prop.items() if k not in ("title", "description")}
    branches = [b for b in schema.pop("anyOf", ()) if b.get("type") != "null"]
    if len(branches) == 1:
        schema.update(branches[0])
    elif branches:
        schema["anyOf"] = branches
    if schema.get("default", ...) is None:
        del schema["default"]
    return schema


def _parameters(op: Operation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PATH_PARAM.findall(op.path)
    ]
    if op.query is not None:
        schema = op.query.model_json_schema(ref_template=REF)
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            param: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": _query_schema(prop),
            }
            if "description" in prop:
                param["description"] = prop["description"]
            params.append(param)
    return params


def _responses(op: Operation, public: bool, refs: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, answer in op.answers.items():
        entry: dict[str, Any] = {"description": op.summary}
        if isinstance(answer, type):
            entry["content"] = _content(refs[(answer, "serialization")])
        elif isinstance(answer, str):
            schema = {"type": "object"} if answer == "application/json" else {"type": "string"}
            entry["content"] = {answer: {"schema": schema}}
        out[str(status)] = entry
    errors = set(COMMON_ERRORS) | set(op.errors)
    if _PATH_PARAM.search(op.path):
        errors.add(404)  # a path parameter names something that may not exist (or be hidden)
    if not public:
        errors.add(401)
    if op.body is not None:
        errors |= {413, 422}
    if op.query is not None:
        errors.add(422)
    error_schema = refs[(ErrorBody, "serialization")]
    for status in sorted(errors):
        out[str(status)] = {"description": ERROR_TEXT[status], "content": _content(error_schema)}
    return out


def _operation(op: Operation, refs: dict[Any, Any]) -> dict[str, Any]:
    public = op.public
    doc: dict[str, Any] = {
        "operationId": f"{op.method.lower()}{re.sub(r'[^A-Za-z0-9]+', '_', op.path)}",
        "summary": op.summary,
        "tags": [op.tag] if op.tag else [],
        "parameters": _parameters(op),
        "responses": _responses(op, public, refs),
        "security": [] if public else [{"bearer": []}],
    }
    if op.body is not None:
        doc["requestBody"] = {
            "required": op.body_required,
            # Responses come in either media type; requests are plain JSON.
            "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
        }
    return doc


def build_document(operations: Sequence[Operation]) -> dict[str, Any]:
    models = _models(operations)
    refs, definitions = models_json_schema(models, ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "calcgraph REST API",
            "version": __version__,
            "description": (
                'REST door of calcgraph. Error bodies are {"detail": "<Kind>: message"} '
                f"(contract section 2). Send Accept: {VENDOR_MEDIA_TYPE} to get that media "
                "type; GraphQL is at /graphql."
            ),
        },
        # Every path answers at the root and, identically, under the planned prefix.
        "servers": [{"url": "/"}, {"url": API_PREFIX}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "RS256 access token from the configured OpenID issuer",
                }
            },
        },
    }
