"""CALCGRAPH_CORS_ORIGINS (contract section 1): preflight and simple requests from a listed
origin get `Access-Control-Allow-Origin` for exactly that origin, with `Authorization` and
`Content-Type` allowed; any other origin gets no CORS headers; unset, nobody does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.settings import Settings

pytestmark = pytest.mark.db

ALLOWED = "https://dash.example.com"
OTHER = "https://dash.example.org"
FOREIGN = "https://evil.example"
PATHS = pytest.mark.parametrize("path", ["/graphql", "/types/check-connection"])


@pytest.fixture
async def cors_client(settings: Settings, database: Database) -> AsyncIterator[httpx.AsyncClient]:
    configured = settings.model_copy(update={"cors_origins": f"{ALLOWED}, {OTHER}/"})
    transport = httpx.ASGITransport(app=create_app(configured, database))
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


def preflight(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }


def body_for(path: str) -> dict[str, object]:
    if path == "/graphql":
        return {"query": "{ __typename }"}
    return {"source": "Force", "target": "Float"}


@PATHS
async def test_preflight_from_an_allowed_origin(cors_client: httpx.AsyncClient, path: str) -> None:
    for origin in (ALLOWED, OTHER):
        response = await cors_client.options(path, headers=preflight(origin))
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == origin
        allowed = response.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed
        assert "content-type" in allowed
        assert "POST" in response.headers["access-control-allow-methods"]


@PATHS
async def test_simple_request_from_an_allowed_origin(
    cors_client: httpx.AsyncClient, path: str
) -> None:
    response = await cors_client.post(path, json=body_for(path), headers={"Origin": ALLOWED})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert response.headers["vary"].lower().count("origin") == 1


async def test_errors_carry_the_header_too(cors_client: httpx.AsyncClient) -> None:
    response = await cors_client.get("/jobs", headers={"Origin": ALLOWED})
    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == ALLOWED


@PATHS
async def test_a_foreign_origin_gets_no_access(cors_client: httpx.AsyncClient, path: str) -> None:
    refused = await cors_client.options(path, headers=preflight(FOREIGN))
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    simple = await cors_client.post(path, json=body_for(path), headers={"Origin": FOREIGN})
    assert "access-control-allow-origin" not in simple.headers


@PATHS
async def test_unset_means_no_cross_origin_access(client: httpx.AsyncClient, path: str) -> None:
    response = await client.options(path, headers=preflight(ALLOWED))
    assert "access-control-allow-origin" not in response.headers
    simple = await client.post(path, json=body_for(path), headers={"Origin": ALLOWED})
    assert "access-control-allow-origin" not in simple.headers


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALCGRAPH_CORS_ORIGINS", f"{ALLOWED},{OTHER}")
    assert Settings(_env_file=None).cors_origin_list == [ALLOWED, OTHER]  # type: ignore[call-arg]
