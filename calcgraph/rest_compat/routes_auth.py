"""REST routes of sign-in and of the caller's own identity."""

from __future__ import annotations

import html
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from calcgraph.auth.authenticate import require_principal
from calcgraph.auth.setup import IdentityAdapters
from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import UserView
from calcgraph.rest_compat.body import parse_body
from calcgraph.rest_compat.operations import Operation
from calcgraph.rest_compat.responses import LoginResultOut, LoginStartOut, UserOut
from calcgraph.rest_compat.schemas import LoginCallbackBody
from calcgraph.rest_compat.state import database_of, services_of


def user_json(user: UserView) -> dict[str, Any]:
    return {
        "id": user.id,
        "sub": user.subject,
        "username": user.username,
        "email": user.email,
        "given_name": user.given_name,
        "family_name": user.family_name,
        "roles": list(user.roles),
        "created_at": user.created_at.isoformat(),
    }


def _identity(request: Request) -> IdentityAdapters:
    return services_of(request).identity


async def login(request: Request) -> JSONResponse:
    start = await _identity(request).login.start(str(request.base_url))
    return JSONResponse(
        {
            "authorization_url": start.authorization_url,
            "code_verifier": start.code_verifier,
            "state": start.state,
            "redirect_uri": start.redirect_uri,
        }
    )


async def callback(request: Request) -> JSONResponse:
    body = await parse_body(request, LoginCallbackBody)
    result = await _identity(request).login.complete(
        body.code, body.code_verifier, str(request.base_url)
    )
    return JSONResponse(
        {
            "access_token": result.access_token,
            "token_type": result.token_type,
            "expires_in": result.expires_in,
            "refresh_token": result.refresh_token,
            "id_token": result.id_token,
            "user": user_json(result.user),
        }
    )


async def me(request: Request) -> JSONResponse:
    principal = require_principal(request)
    database = database_of(request)
    async with database.read_session() as session:
        user = await access_service.me(session, principal)
    return JSONResponse(user_json(user))


_CALLBACK_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>calcgraph sign-in</title></head>
<body><h1>{title}</h1><p>{message}</p>
<dl><dt>code</dt><dd><code>{code}</code></dd><dt>state</dt><dd><code>{state}</code></dd></dl>
<p><a href="/ui/callback{query}">Continue in the calcgraph web app</a></p>
<script>
// A sign-in the web app started (its verifier waits in this tab's sessionStorage) continues
// there at once; any other client reads the code from this page.
try {{
  var pending = JSON.parse(sessionStorage.getItem("calcgraph.login") || "null");
  if (pending && pending.state === new URLSearchParams(location.search).get("state")) {{
    location.replace("/ui/callback" + location.search);
  }}
}} catch (e) {{}}
</script>
</body></html>
"""


async def callback_page(request: Request) -> HTMLResponse:
    """The contract's default redirect URI. The code verifier stays with the client that asked
    for it, so this page cannot finish the sign-in itself: it shows the code and state for the
    client to send with its verifier to POST /auth/callback."""
    params = request.query_params
    error = params.get("error")
    if error is not None:
        title = "Sign-in failed"
        message = html.escape(f"{error}: {params.get('error_description', '')}".rstrip(": "))
        status = 400
    else:
        title = "Sign-in: one step left"
        message = (
            "Send this code with the code_verifier from POST /auth/login to POST /auth/callback."
            if params.get("code")
            else "No authorization code arrived; start again with POST /auth/login."
        )
        status = 200 if params.get("code") else 400
    page = _CALLBACK_PAGE.format(
        title=title,
        message=message,
        code=html.escape(params.get("code", "")),
        state=html.escape(params.get("state", "")),
        query=html.escape("?" + str(request.url.query) if request.url.query else ""),
    )
    return HTMLResponse(page, status_code=status)


routes = [
    Route("/auth/login", login, methods=["POST"]),
    Route("/auth/callback", callback, methods=["POST"]),
    Route("/auth/me", me, methods=["GET"]),
    Route("/auth/callback-page", callback_page, methods=["GET"]),
]
operations = [
    Operation(
        "POST",
        "/auth/login",
        "Start an authorization code sign-in",
        {200: LoginStartOut},
        tag="auth",
    ),
    Operation(
        "POST",
        "/auth/callback",
        "Finish the sign-in: code and PKCE verifier for tokens",
        {200: LoginResultOut},
        body=LoginCallbackBody,
        errors=(400,),
        tag="auth",
    ),
    Operation("GET", "/auth/me", "The caller's user", {200: UserOut}, tag="auth"),
    Operation(
        "GET",
        "/auth/callback-page",
        "Redirect target: shows the code to send to POST /auth/callback",
        {200: "text/html", 400: "text/html"},
        tag="auth",
    ),
]
