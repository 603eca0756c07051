"""The web app at `/ui/` and the GraphiQL page, both built from `web/` by Vite into `dist/`
(shipped as package data, so `pip install` users get them; contract 4b: every script, style
and font comes from this server).

Hashed assets are cached for a year; `index.html` is never cached, so a new build is seen at
once. Every other path under `/ui/` answers `index.html`: the app routes deep links itself.
"""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

DIST = Path(__file__).resolve().parent / "dist"
ASSETS = DIST / "assets"
_IMMUTABLE = "public, max-age=31536000, immutable"
_NO_CACHE = "no-cache"

_MISSING = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>calcgraph</title>
</head><body><h1>The web app is not built</h1><p>This installation has no built web files.
Build them with <code>make install</code> (or <code>cd web &amp;&amp; npm ci &amp;&amp;
npm run build</code>).</p></body></html>"""


def _page(name: str) -> Response:
    page = DIST / name
    if not page.is_file():
        return HTMLResponse(_MISSING, status_code=503, headers={"Cache-Control": _NO_CACHE})
    return FileResponse(page, media_type="text/html", headers={"Cache-Control": _NO_CACHE})


def graphiql_page() -> Response:
    return _page("graphiql.html")


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


async def root(request: Request) -> Response:
    # Browsers go to the app; API clients keep the JSON 404 of an unknown path.
    if wants_html(request):
        return RedirectResponse("/ui/", status_code=307)
    raise HTTPException(404)


async def ui_redirect(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=308)


async def asset(request: Request) -> Response:
    name = request.path_params["path"]
    path = (ASSETS / name).resolve()
    # Only files inside dist/assets: `..` and absolute paths fall outside and get 404.
    if not path.is_relative_to(ASSETS.resolve()) or not path.is_file():
        raise HTTPException(404)
    return FileResponse(path, headers={"Cache-Control": _IMMUTABLE})


async def app_page(request: Request) -> Response:
    return _page("index.html")


routes: list[BaseRoute] = [
    Route("/", root, methods=["GET"]),
    Route("/ui", ui_redirect, methods=["GET"]),
    Route("/ui/assets/{path:path}", asset, methods=["GET"]),
    Route("/ui/{path:path}", app_page, methods=["GET"]),
]


def is_public(method: str, path: str) -> bool:
    """The app's files and the redirect to them need no token (contract 3)."""
    return method == "GET" and (path in ("/", "/ui") or path.startswith("/ui/"))
