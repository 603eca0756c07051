"""Every route the app serves needs a token, except the contract's public list.

Generated from the app's own routing table, so a route added later is covered without anyone
remembering to add it to the authorization matrix.
"""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from calcgraph.auth.authenticate import OPTIONAL_AUTH_PATHS, PUBLIC_ROUTES


def _concrete(path: str) -> str:
    # Any value will do for a path parameter: authentication comes before lookup.
    return re.sub(r"\{[^}]+\}", "x0", path)


def _protected(app: Starlette) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if not isinstance(route, Route) or route.path in OPTIONAL_AUTH_PATHS:
            continue
        for method in sorted(route.methods or ()):
            if method == "HEAD" or (method, route.path) in PUBLIC_ROUTES:
                continue
            found.append((method, route.path))
    return found


async def test_there_are_protected_routes(app: Starlette) -> None:
    assert ("GET", "/auth/me") in _protected(app)


async def test_anonymous_gets_401_on_every_protected_route(
    app: Starlette, client: httpx.AsyncClient
) -> None:
    wrong: list[str] = []
    for method, path in _protected(app):
        response = await client.request(method, _concrete(path), json={})
        if response.status_code != 401 or not response.json()["detail"].startswith(
            "Unauthenticated: "
        ):
            wrong.append(f"{method} {path} -> {response.status_code}")
    assert wrong == []


@pytest.mark.parametrize(("method", "path"), sorted(PUBLIC_ROUTES))
async def test_public_routes_answer_without_a_token(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await client.request(method, path, json={})
    assert response.status_code != 401
