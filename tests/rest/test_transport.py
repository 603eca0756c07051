"""Rules every route obeys: error bodies, header versioning, body limit, no stack traces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.settings import Settings

VENDOR = "application/vnd.service.v1+json"
CHECK = {"source": "Force", "target": "Float"}


class TestHeaderVersioning:
    async def test_vendor_accept_answers_json_under_the_vendor_type(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await client.post(
            "/types/check-connection", json=CHECK, headers={"Accept": VENDOR}
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == VENDOR
        assert response.json()["compatibility"] == "ALLOWED"

    async def test_vendor_type_among_others_is_accepted(self, client: httpx.AsyncClient) -> None:
        response = await client.get(
            "/types", headers={"Accept": f"application/vnd.service.v2+json, {VENDOR};q=0.5"}
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == VENDOR

    @pytest.mark.parametrize(
        "accept", ["application/vnd.service.v2+json", "application/vnd.other.v1+json"]
    )
    async def test_only_another_vendor_type_is_406(
        self, client: httpx.AsyncClient, accept: str
    ) -> None:
        response = await client.get("/types", headers={"Accept": accept})
        assert response.status_code == 406
        assert response.json()["detail"].startswith("NotAcceptable: ")

    @pytest.mark.parametrize("accept", ["application/json", "*/*", ""])
    async def test_plain_json(self, client: httpx.AsyncClient, accept: str) -> None:
        response = await client.get("/types", headers={"Accept": accept})
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"

    async def test_errors_also_take_the_vendor_type(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/nowhere", headers={"Accept": VENDOR})
        assert response.status_code == 404
        assert response.headers["content-type"] == VENDOR


class TestErrorBodies:
    async def test_unknown_route_is_404_notfound(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/no/such/route")
        assert response.status_code == 404
        assert response.json()["detail"].startswith("NotFound: ")

    async def test_wrong_method_is_405(self, client: httpx.AsyncClient) -> None:
        response = await client.delete("/types")
        assert response.status_code == 405
        assert response.json()["detail"].startswith("MethodNotAllowed: ")
        assert "GET" in response.headers["allow"]

    async def test_unexpected_error_is_masked(
        self, settings: Settings, database: Database, caplog: pytest.LogCaptureFixture
    ) -> None:
        async def boom(request: Request) -> Response:
            raise RuntimeError("secret internal detail /etc/passwd")

        app = create_app(settings, database)
        app.router.routes.append(Route("/boom", boom))
        async with _client(app) as client:
            response = await client.get("/boom")
        assert response.status_code == 500
        assert response.json() == {
            "detail": "InternalError: an unexpected error occurred; it has been logged"
        }
        assert "secret" not in response.text
        assert "secret internal detail" in caplog.text


class TestBodyLimit:
    async def test_declared_length_over_the_limit_is_413(
        self, settings: Settings, database: Database
    ) -> None:
        app = create_app(settings.model_copy(update={"max_body_bytes": 1000}), database)
        async with _client(app) as client:
            response = await client.post("/types/check-connection", content=b"x" * 1001)
        assert response.status_code == 413
        assert response.json()["detail"].startswith("PayloadTooLarge: ")
        assert "1000" in response.json()["detail"]

    async def test_streamed_body_over_the_limit_is_413(
        self, settings: Settings, database: Database
    ) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(5):
                yield b"y" * 400

        app = create_app(settings.model_copy(update={"max_body_bytes": 1000}), database)
        async with _client(app) as client:
            response = await client.post("/types/check-connection", content=chunks())
        assert response.status_code == 413

    async def test_body_at_the_limit_is_read(self, settings: Settings, database: Database) -> None:
        body = b'{"source": "Force", "target": "Float"}'
        app = create_app(settings.model_copy(update={"max_body_bytes": len(body)}), database)
        async with _client(app) as client:
            response = await client.post("/types/check-connection", content=body)
        assert response.status_code == 200


class TestHealth:
    async def test_reports_the_database(self, client: httpx.AsyncClient, backend: str) -> None:
        response = await client.get("/health")
        assert response.status_code == 200
        assert response.json()["status"] == "ok"
        assert response.json()["database"] == backend


def _client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
