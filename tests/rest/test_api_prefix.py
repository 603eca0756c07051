"""Contract 11, version prefix: every REST route answers also under `/api/v1`, identically;
the OpenAPI document says so once, as a server entry; `/api/v2` and non-REST paths under the
prefix are 404."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from calcgraph.rest_compat.api import OPERATIONS, document
from tests.packages.publishing import Bearer, publish, small_body

CHECK = {"source": "Force", "target": "Float"}
# Answers that change between two calls whatever the path (counters, clocks).
VARYING = {"/metrics", "/health"}


class TestPrefix:
    async def test_public_route_answers_identically(self, client: httpx.AsyncClient) -> None:
        plain = await client.post("/types/check-connection", json=CHECK)
        prefixed = await client.post("/api/v1/types/check-connection", json=CHECK)
        assert prefixed.status_code == plain.status_code == 200
        assert prefixed.json() == plain.json()

    async def test_protected_route_needs_the_same_token(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        refused = await client.get("/api/v1/packages")
        assert refused.status_code == 401
        assert refused.json()["detail"].startswith("Unauthenticated: ")
        report = await publish(client, bearer("alice"), small_body("prefix-pkg", "1.0.0"))
        plain = await client.get(f"/packages/{report['package_id']}", headers=bearer("alice"))
        prefixed = await client.get(
            f"/api/v1/packages/{report['package_id']}", headers=bearer("alice")
        )
        assert prefixed.status_code == 200
        assert prefixed.json() == plain.json()
        hidden = await client.get(f"/api/v1/packages/{report['package_id']}", headers=bearer("bob"))
        assert hidden.status_code == 403

    async def test_publish_under_the_prefix(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        response = await client.post(
            "/api/v1/packages", json=small_body("prefix-pub", "1.0.0"), headers=bearer("alice")
        )
        assert response.status_code == 201, response.text
        assert response.json()["package"] == "prefix-pub"

    async def test_wrong_method_is_the_routes_405(self, client: httpx.AsyncClient) -> None:
        response = await client.delete("/api/v1/types")
        assert response.status_code == 405

    @pytest.mark.parametrize(
        "path",
        [
            "/api/v2/types",
            "/api/v2/packages",
            "/api/v1/graphql",
            "/api/v1/ui/",
            "/api/v1/api/v1/types",
            "/api/v1",
            "/api/v1/",
            "/api/v1/nowhere",
            "/api/v1x/types",
        ],
    )
    async def test_anything_else_is_404(self, client: httpx.AsyncClient, path: str) -> None:
        response = await client.get(path)
        assert response.status_code == 404
        assert response.json()["detail"].startswith("NotFound")

    async def test_nul_and_encoded_paths_are_404(self, client: httpx.AsyncClient) -> None:
        for path in ("/api/v1/%00types", "/api/v1/..%2Ftypes"):
            response = await client.get(path)
            assert response.status_code == 404, path


class TestDocument:
    def test_a_server_entry_not_duplicated_operations(self) -> None:
        doc = document()
        assert {"url": "/api/v1"} in doc["servers"]
        assert not any(path.startswith("/api/") for path in doc["paths"])
        assert sum(len(methods) for methods in doc["paths"].values()) == len(OPERATIONS)

    async def test_document_is_served_under_the_prefix(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/api/v1/openapi.json")
        assert response.status_code == 200
        assert response.json()["servers"] == document()["servers"]


def _filled(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


class TestEveryRoute:
    async def test_every_operation_answers_alike_under_the_prefix(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        """Each of the document's operations, with and without the prefix, as the same user
        (its path parameters an unknown `x`, an empty body): the same status and answer."""
        alice = bearer("alice")
        await client.get("/auth/me", headers=alice)
        compared = 0
        for operation in OPERATIONS:
            path = _filled(operation.path)
            kw: dict[str, Any] = {"headers": alice}
            if operation.method in ("POST", "PUT", "PATCH"):
                kw["json"] = {}
            plain = await client.request(operation.method, path, **kw)
            prefixed = await client.request(operation.method, f"/api/v1{path}", **kw)
            where = f"{operation.method} {operation.path}"
            assert prefixed.status_code == plain.status_code, where
            assert prefixed.status_code != 404 or "{" in operation.path, where
            if path not in VARYING and plain.headers.get("content-type", "").startswith(
                "application/json"
            ):
                assert prefixed.json() == plain.json(), where
            compared += 1
        assert compared == len(OPERATIONS)
