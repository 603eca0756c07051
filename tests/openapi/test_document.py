"""The OpenAPI document covers every REST route, is valid OpenAPI, and its request schemas say
what the routes accept: examples pass, unknown or missing fields are refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate
from starlette.applications import Starlette
from starlette.routing import Route

from calcgraph.auth.authenticate import PUBLIC_ROUTES
from calcgraph.rest_compat.api import document
from calcgraph.rest_compat.openapi import build_document
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.wire_health import Health

METHODS = ("get", "post", "put", "patch", "delete")
# Reached through the example bodies in document order (a package is published before the
# workflow that uses it is saved); these must succeed, the others only avoid a body refusal.
MUST_SUCCEED = {
    ("post", "/types/check-connection"),
    ("post", "/organizations"),
    ("post", "/packages"),
    ("post", "/workflows/validate"),
    ("post", "/workflows"),
}


def _app_operations(app: Starlette) -> set[tuple[str, str]]:
    found = set()
    for route in app.routes:
        if isinstance(route, Route) and route.path != "/graphql":
            found |= {(m.lower(), route.path) for m in route.methods or () if m != "HEAD"}
    return found


def _document_operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m, path) for path, item in doc["paths"].items() for m in item if m in METHODS}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    name = schema["$ref"].rsplit("/", 1)[-1]
    resolved: dict[str, Any] = doc["components"]["schemas"][name]
    return resolved


def _bodies(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if "requestBody" in op:
                ref = op["requestBody"]["content"]["application/json"]["schema"]
                out.append((method, path, _resolve(doc, ref)))
    return out


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x0", path)


def _is_body_refusal(response: httpx.Response) -> bool:
    detail = response.json().get("detail", "") if response.content else ""
    return response.status_code == 422 and (
        detail.startswith("ValidationError: invalid request body")
        or detail.startswith("ValidationError: request body")
    )


def test_document_is_valid_openapi() -> None:
    doc = document()
    validate(doc)
    assert doc["openapi"].startswith("3.")


async def test_every_route_is_documented_and_nothing_else(app: Starlette) -> None:
    doc = document()
    assert _app_operations(app) == _document_operations(doc)


async def test_security_follows_the_public_list() -> None:
    doc = document()
    for method, path in _document_operations(doc):
        op = doc["paths"][path][method]
        public = (method.upper(), path) in PUBLIC_ROUTES
        assert op["security"] == ([] if public else [{"bearer": []}]), (method, path)
        assert ("401" in op["responses"]) is not public, (method, path)
        for status, answer in op["responses"].items():
            if int(status) >= 400 and "text/html" not in answer["content"]:
                ref = answer["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorBody")


async def test_served_without_a_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    assert response.json() == document()


async def test_every_example_body_is_accepted(
    client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    headers = bearer("alice")
    bodies = _bodies(document())
    assert len(bodies) >= 12
    seen = set()
    for method, path, schema in bodies:
        example = schema["examples"][0]
        response = await client.request(method, _concrete(path), json=example, headers=headers)
        assert response.status_code < 500, (method, path, response.text)
        assert not _is_body_refusal(response), (method, path, response.text)
        if (method, path) in MUST_SUCCEED:
            assert 200 <= response.status_code < 300, (method, path, response.text)
            seen.add((method, path))
    assert seen == MUST_SUCCEED


async def test_unknown_and_missing_fields_are_refused_as_the_schema_says(
    client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    headers = bearer("alice")
    checked = 0
    for method, path, schema in _bodies(document()):
        example = schema["examples"][0]
        if schema.get("additionalProperties") is False:
            body = {**example, "not_in_the_schema": 1}
            response = await client.request(method, _concrete(path), json=body, headers=headers)
            assert _is_body_refusal(response), (method, path, response.text)
            assert ["body", "not_in_the_schema"] in [e["loc"] for e in response.json()["errors"]]
            checked += 1
        for field in schema.get("required", []):
            body = {k: v for k, v in example.items() if k != field}
            response = await client.request(method, _concrete(path), json=body, headers=headers)
            assert _is_body_refusal(response), (method, path, field, response.text)
            assert ["body", field] in [e["loc"] for e in response.json()["errors"]]
            checked += 1
    assert checked >= 20


def test_a_path_parameter_documents_404_without_declaring_it() -> None:
    """A path names something that may not exist (or that the caller may not see): its 404 is
    derived from the path, as 413/422 are from a body, not listed by each route."""
    rest = Operations(tag="widgets")

    @rest("GET", "/widgets/{widget_id}", {200: Health})
    async def get_widget(call: Call[None, None]) -> None:
        """A widget"""

    @rest("GET", "/widgets", {200: Health})
    async def list_widgets(call: Call[None, None]) -> None:
        """Widgets"""

    doc = build_document(rest.declared)
    assert "404" in doc["paths"]["/widgets/{widget_id}"]["get"]["responses"]
    assert "404" not in doc["paths"]["/widgets"]["get"]["responses"]


def test_an_operation_without_a_summary_is_refused() -> None:
    """The summary is the docstring's first paragraph: a handler without one does not declare."""
    rest = Operations(tag="widgets")

    async def nameless(call: Call[None, None]) -> None:
        pass

    with pytest.raises(TypeError, match="summary"):
        rest("GET", "/widgets", {200: Health})(nameless)
    assert rest.declared == []


def test_the_summary_is_the_first_paragraph_on_one_line() -> None:
    rest = Operations(tag="widgets")

    @rest("GET", "/widgets", {200: Health})
    async def list_widgets(call: Call[None, None]) -> None:
        """Widgets the caller
        can see

        Not the summary."""

    assert rest.declared[0].summary == "Widgets the caller can see"
