"""The web app at `/ui/` and the GraphiQL page, both built from `web/` by Vite into `dist/`
(shipped as package data, so `pip install` users get them; contract 4b: every script, style
and font comes from this server).

Hashed assets are cached for a year; `index.html` is never cached, so a new build is seen at
once. Every other path under `/ui/` answers `index.html`: the app routes deep links itself.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from functools import cache
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


# Contract section 8b, browser hardening: every response of the app's files says so.
_HARDENING = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_INLINE_STYLE = re.compile(r"<style>(.*?)</style>", re.DOTALL)


def content_security_policy(html: str, *, style_nonce: str | None = None) -> str:
    """The policy of one page: scripts, styles, workers and requests from this server only
    (fonts too, or inlined as `data:` in this server's stylesheets), no plugins, never framed.
    A `<style>` block written in the page itself (built from web/, so this server's own) is
    allowed by its hash; `style_nonce`: the `<style>` elements the page's own scripts write as
    they run (GraphiQL's editor), each given this answer's nonce (web/src/cspNonce.ts), are
    allowed by it. No page allows inline styles (`'unsafe-inline'`) or inline scripts."""
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(block.encode()).digest()).decode()}'"
        for block in _INLINE_STYLE.findall(html)
    )
    nonce = f" 'nonce-{style_nonce}'" if style_nonce is not None else ""
    return (
        "default-src 'self'; script-src 'self'; "
        f"style-src 'self'{hashes}{nonce}; img-src 'self' data:; font-src 'self' data:; "
        "connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


# The pages whose scripts write <style> elements as they run: a nonce per answer, in the page
# (`<meta name="csp-nonce">`) and in its policy.
_NONCED = frozenset({"graphiql.html"})
_NONCE_META = '<meta name="csp-nonce" content="{nonce}" />'


@cache
def _policy_of(path: Path, mtime_ns: int) -> str:
    return content_security_policy(path.read_text(encoding="utf-8"))


@cache
def _text_of(path: Path, mtime_ns: int) -> str:
    return path.read_text(encoding="utf-8")


def _page(name: str) -> Response:
    page = DIST / name
    if not page.is_file():
        missing_page = missing.page()
        headers = {
            "Cache-Control": _NO_CACHE,
            "Content-Security-Policy": content_security_policy(missing_page),
            **_HARDENING,
        }
        return HTMLResponse(missing_page, status_code=503, headers=headers)
    mtime = page.stat().st_mtime_ns
    if name in _NONCED:
        nonce = secrets.token_urlsafe(18)
        html = _text_of(page, mtime).replace(
            "<head>", "<head>\n    " + _NONCE_META.format(nonce=nonce), 1
        )
        policy = content_security_policy(html, style_nonce=nonce)
        headers = {"Cache-Control": "no-store", "Content-Security-Policy": policy, **_HARDENING}
        return HTMLResponse(html, headers=headers)
    policy = _policy_of(page, mtime)
    headers = {"Cache-Control": _NO_CACHE, "Content-Security-Policy": policy, **_HARDENING}
    return FileResponse(page, media_type="text/html", headers=headers)


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
    return FileResponse(path, headers={"Cache-Control": _IMMUTABLE, **_HARDENING})


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
