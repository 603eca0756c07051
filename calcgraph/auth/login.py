"""The browser sign-in: authorization code with PKCE (S256) against the identity provider.

The service generates the PKCE pair and hands the verifier to the client (the specification's
`POST /auth/login`), so it keeps no login state; the client brings code and verifier back.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from calcgraph.auth.authenticate import Authenticator
from calcgraph.auth.provider import HTTP_TIMEOUT, OidcProvider
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Identity
from calcgraph.domain.access.service import access_service
from calcgraph.domain.access.views import UserView
from calcgraph.domain.errors import InvalidRequest, Unavailable

log = logging.getLogger("calcgraph.auth")


def code_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class LoginStart:
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


@dataclass(frozen=True)
class LoginResult:
    access_token: str
    token_type: str
    expires_in: int | None
    refresh_token: str | None
    id_token: str | None
    user: UserView


@dataclass
class LoginFlow:
    provider: OidcProvider
    authenticator: Authenticator
    database: Database
    client_id: str | None
    client_secret: str | None
    redirect_uri: str | None
    scopes: str

    def _client_id(self) -> str:
        if not self.client_id:
            raise InvalidRequest("sign-in is not configured: set CALCGRAPH_OIDC_CLIENT_ID")
        return self.client_id

    def _redirect(self, base_url: str) -> str:
        return self.redirect_uri or f"{base_url.rstrip('/')}/auth/callback-page"

    async def start(self, base_url: str) -> LoginStart:
        client_id = self._client_id()
        metadata = await self.provider.metadata()
        if not metadata.authorization_endpoint:
            raise Unavailable("the identity provider names no authorization endpoint")
        verifier = secrets.token_urlsafe(64)
        state = secrets.token_urlsafe(24)
        redirect_uri = self._redirect(base_url)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect_uri,
                "scope": self.scopes,
                "state": state,
                "code_challenge": code_challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        separator = "&" if "?" in metadata.authorization_endpoint else "?"
        return LoginStart(
            authorization_url=f"{metadata.authorization_endpoint}{separator}{query}",
            code_verifier=verifier,
            state=state,
            redirect_uri=redirect_uri,
        )

    async def complete(self, code: str, code_verifier: str, base_url: str) -> LoginResult:
        """Exchange the code at the token endpoint, verify the access token like any other,
        provision its user, and return both."""
        tokens = await self._exchange(code, code_verifier, self._redirect(base_url))
        access_token = tokens.get("access_token")
        if not isinstance(access_token, str):
            raise Unavailable("the identity provider answered without an access token")
        claims = await self.authenticator.verifier.verify(access_token)
        principal = await self.authenticator.principal_for(Identity.from_claims(claims))
        async with self.database.write_session() as session:
            user = await access_service.signed_in(session, principal)
        expires_in = tokens.get("expires_in")
        refresh_token = tokens.get("refresh_token")
        id_token = tokens.get("id_token")
        return LoginResult(
            access_token=access_token,
            token_type=str(tokens.get("token_type", "Bearer")),
            expires_in=int(expires_in) if isinstance(expires_in, int | float) else None,
            refresh_token=refresh_token if isinstance(refresh_token, str) else None,
            id_token=id_token if isinstance(id_token, str) else None,
            user=user,
        )

    async def _exchange(self, code: str, verifier: str, redirect_uri: str) -> dict[str, Any]:
        metadata = await self.provider.metadata()
        if not metadata.token_endpoint:
            raise Unavailable("the identity provider names no token endpoint")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": self._client_id(),
            "code_verifier": verifier,
        }
        if self.client_secret:
            # The confidential API client of the specification authenticates with its secret.
            form["client_secret"] = self.client_secret
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
                response = await http.post(
                    metadata.token_endpoint, data=form, headers={"Accept": "application/json"}
                )
        except httpx.HTTPError as exc:
            log.warning("token endpoint unreachable: %s", exc)
            raise Unavailable("the identity provider is unreachable; retry later") from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if response.status_code in (400, 401):
            error = body.get("error", "invalid_grant")
            raise InvalidRequest(f"the identity provider refused the code: {error}")
        if response.status_code != 200:
            raise Unavailable(f"the token endpoint answered {response.status_code}")
        return body
