"""REST routes of sign-in and of the caller's own identity."""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse

from calcgraph.auth.login import LoginFlow, LoginResult, LoginStart
from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import UserView
from calcgraph.rest_compat.operations import Call, Operations
from calcgraph.rest_compat.state import services_of
from calcgraph.rest_compat.wire_auth import (
    LoginCallbackBody,
    LoginResultOut,
    LoginStartOut,
    UserOut,
)

rest = Operations(tag="auth")


def _login(request: Request) -> LoginFlow:
    return services_of(request).identity


@rest("POST", "/auth/login", {200: LoginStartOut})
async def login(call: Call[None, None]) -> LoginStart:
    """Start an authorization code sign-in"""
    return await _login(call.request).start(str(call.request.base_url))


@rest("POST", "/auth/callback", {200: LoginResultOut}, errors=(400,))
async def callback(call: Call[LoginCallbackBody, None]) -> LoginResult:
    """Finish the sign-in: code and PKCE verifier for tokens"""
    return await _login(call.request).complete(
        call.body.code, call.body.code_verifier, str(call.request.base_url)
    )


@rest("GET", "/auth/me", {200: UserOut})
async def me(call: Call[None, None]) -> UserView:
    """The caller's user"""
    return await call.read(access_service.me)


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


@rest("GET", "/auth/callback-page", {200: "text/html", 400: "text/html"})
async def callback_page(call: Call[None, None]) -> HTMLResponse:
    """Redirect target: shows the code to send to POST /auth/callback

    The contract's default redirect URI. The code verifier stays with the client that asked
    for it, so this page cannot finish the sign-in itself: it shows the code and state for the
    client to send with its verifier to POST /auth/callback."""
    request = call.request
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
