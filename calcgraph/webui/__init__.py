"""The web app at `/ui/` and the GraphiQL page, both built from `web/` by Vite into `dist/`
(shipped as package data, so `pip install` users get them; contract 4b: every script, style
and font comes from this server).

Hashed assets are cached for a year; `index.html` is never cached, so a new build is seen at
once. Every other path under `/ui/` answers `index.html`: the app routes deep links itself.
"""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.webui import missing

DIST = Path(__file__).resolve().parent / "dist"
ASSETS = DIST / "assets"
_IMMUTABLE = "public, max-age=31536000, immutable"
_NO_CACHE = "no-cache"


def _page(name: str) -> Response:
    page = DIST / name
    if not page.is_file():
        return HTMLResponse(missing.page(), status_code=503, headers={"Cache-Control": _NO_CACHE})
    return FileResponse(page, media_type="text/html", headers={"Cache-Control": _NO_CACHE})


def graphiql_page() -> Response:
    return _page("graphiql.html")


class BrowserRootRedirect:
    """`GET /` from a browser (Accept text/html) goes to the app; API clients keep the JSON 404
    of an unrouted path. A middleware, not a route: `/` is no operation of the REST door."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == "/"
            and scope["method"] in ("GET", "HEAD")
            and "text/html" in Headers(scope=scope).get("accept", "")
        ):
            await RedirectResponse("/ui/", status_code=307)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def asset(request: Request) -> Response:
    name = request.path_params["path"]
    path = (ASSETS / name).resolve()
    # Only files inside dist/assets: `..` and absolute paths fall outside and get 404.
    if not path.is_relative_to(ASSETS.resolve()) or not path.is_file():
        raise HTTPException(404)
    return FileResponse(path, headers={"Cache-Control": _IMMUTABLE})


async def app_page(request: Request) -> Response:
    return _page("index.html")


# A mount, not REST operations: the OpenAPI document describes the API, not the app's files.
routes: list[BaseRoute] = [
    Mount(
        "/ui",
        routes=[
            Route("/assets/{path:path}", asset, methods=["GET"]),
            Route("/{path:path}", app_page, methods=["GET"]),
        ],
    )
]


def is_public(method: str, path: str) -> bool:
    """The app's files need no token (contract 3)."""
    return method == "GET" and (path == "/ui" or path.startswith("/ui/"))
