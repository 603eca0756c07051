"""A real OpenID provider for tests: discovery and JWKS served over HTTP on loopback from keys
the test controls, so rotation and the refetch throttle are exercised for real."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "calcgraph-api"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def claims_of(
    issuer: str, username: str = "alice", roles: Iterable[str] = ("user",)
) -> dict[str, Any]:
    """A development user's access token claims, valid 5 minutes from now."""
    now = int(time.time())
    return {
        "iss": issuer,
        "aud": AUDIENCE,
        "sub": f"sub-{username}",
        "iat": now,
        "exp": now + 300,
        "typ": "Bearer",
        "preferred_username": username,
        "email": f"{username}@example.test",
        "given_name": username.title(),
        "family_name": "Tester",
        "realm_access": {"roles": list(roles)},
    }


def sign_with(
    key: rsa.RSAPrivateKey,
    kid: str,
    claims: Mapping[str, Any],
    headers: Mapping[str, Any] | None = None,
    algorithm: str = "RS256",
) -> str:
    """`claims` signed as the provider signs them (another process may hold the key)."""
    return jwt.encode(
        dict(claims), key, algorithm=algorithm, headers={"kid": kid, **(headers or {})}
    )


class LocalIdentityProvider:
    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.jwks_hits = 0
        self.discovery_hits = 0
        self.token_requests: list[dict[str, str]] = []
        self.current_kid = self.add_key()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    provider.discovery_hits += 1
                    body: Any = {
                        "issuer": provider.issuer,
                        "jwks_uri": f"{provider.issuer}/jwks",
                        "authorization_endpoint": f"{provider.issuer}/authorize",
                        "token_endpoint": f"{provider.issuer}/token",
                    }
                elif self.path == "/jwks":
                    provider.jwks_hits += 1
                    body = provider.jwks()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                # A token endpoint that records what the client sent; code "bad" is refused.
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                provider.token_requests.append(form)
                if self.path != "/token" or form.get("code") == "bad":
                    status, body = 400, {"error": "invalid_grant"}
                else:
                    status = 200
                    body = {
                        "access_token": provider.token("carol"),
                        "token_type": "Bearer",
                        "expires_in": 300,
                    }
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> LocalIdentityProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def add_key(self, kid: str | None = None) -> str:
        kid = kid or uuid.uuid4().hex
        self.keys[kid] = new_key()
        return kid

    def rotate(self) -> str:
        """A new signing key replaces all others, as after a rotation at the provider."""
        kid = uuid.uuid4().hex
        self.keys = {kid: new_key()}
        self.current_kid = kid
        return kid

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def claims(self, username: str = "alice", roles: Iterable[str] = ("user",)) -> dict[str, Any]:
        return claims_of(self.issuer, username, roles)

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        kid: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
        headers: Mapping[str, Any] | None = None,
        algorithm: str = "RS256",
    ) -> str:
        kid = kid or self.current_kid
        return sign_with(key or self.keys[kid], kid, claims, headers, algorithm)

    def token(self, username: str = "alice", roles: Iterable[str] = ("user",)) -> str:
        return self.sign(self.claims(username, roles))

    def headers(self, username: str = "alice", roles: Iterable[str] = ("user",)) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(username, roles)}"}
