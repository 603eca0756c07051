"""The indexed router picks, for every request, the route Starlette's own scan of every route
would pick: the first full match in the routes' order; what no route matches fully (404,
405) is answered by Starlette's scan as before."""

from __future__ import annotations

import re

import httpx
from starlette.applications import Starlette
from starlette.routing import Match, Route
from starlette.types import Scope

from calcgraph.serving.routing import IndexedRouter


def _scope(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def _first_full(routes: list[object], scope: Scope) -> object | None:
    for route in routes:
        if route.matches(scope)[0] is Match.FULL:  # type: ignore[attr-defined]
            return route
    return None


def test_every_route_is_found_as_the_full_scan_finds_it(app: Starlette) -> None:
    router = app.router
    assert isinstance(router, IndexedRouter)
    checked = 0
    for route in router.routes:
        if not isinstance(route, Route):
            continue
        path = re.sub(r"\{[^}]+\}", "x1", route.path)
        for method in sorted(route.methods or {"GET"}):
            scope = _scope(method, path)
            expected = _first_full(router.routes, scope)
            assert expected is not None
            assert _first_full(router.candidates(path), scope) is expected, (method, path)
            checked += 1
    assert checked > 40


async def test_unmatched_paths_keep_their_404_and_405(client: httpx.AsyncClient) -> None:
    assert (await client.get("/no-such-route/at/all")).status_code == 404
    assert (await client.delete("/types/check-connection")).status_code == 405
