"""Issue 27, point 6: the development identity provider (contract sections 3 and 8b).

- The PKCE verifier is checked for every code that has a challenge, wherever the token request
  puts its parameters (`grant_type` or everything in the query string).
- `PUT /users/<sub>` cannot grant the admin role: the development users cannot be edited.
- `serve` trusts the provider answering on its port only when it proves it is the one
  calcgraph started for this user; anything else makes it refuse to start.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from calcgraph.auth.devidp import DevIdentityProvider, _answers, proof_file, start_for_serve
from tests.auth.test_login import sign_in_at_the_provider

REDIRECT = "http://127.0.0.1:5173/callback"


@pytest.fixture(scope="module")
def provider() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider("calcgraph-api") as running:
        yield running


def _code_with_challenge(provider: DevIdentityProvider, verifier: str) -> str:
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    params = {
        "response_type": "code",
        "client_id": "calcgraph-dashboard",
        "redirect_uri": REDIRECT,
        "scope": "openid",
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
    }
    url = httpx.URL(f"{provider.issuer}/oauth2/authorize", params=params)
    return sign_in_at_the_provider(str(url), "alice")["code"][0]


def _token_request(code: str, verifier: str | None) -> dict[str, str]:
    values = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": "calcgraph-dashboard",
        "client_secret": "api-client-secret",
    }
    if verifier is not None:
        values["code_verifier"] = verifier
    return values


class TestThePkceVerifierIsCheckedForEveryCode:
    @pytest.mark.parametrize("in_query", [("grant_type",), ("grant_type", "code"), "all"])
    def test_a_wrong_verifier_with_parameters_in_the_query_string(
        self, provider: DevIdentityProvider, in_query: Any
    ) -> None:
        right = "r" * 50
        code = _code_with_challenge(provider, right)
        values = _token_request(code, "w" * 50)
        keys = set(values) if in_query == "all" else set(in_query)
        query = {k: v for k, v in values.items() if k in keys}
        form = {k: v for k, v in values.items() if k not in keys}
        refused = httpx.post(f"{provider.issuer}/oauth2/token", params=query, data=form)
        assert refused.status_code == 400, refused.text
        assert "access_token" not in refused.text
        # The right verifier still redeems it.
        granted = httpx.post(f"{provider.issuer}/oauth2/token", data=_token_request(code, right))
        assert granted.status_code == 200, granted.text

    def test_no_verifier_at_all(self, provider: DevIdentityProvider) -> None:
        code = _code_with_challenge(provider, "v" * 50)
        values = _token_request(code, None)
        refused = httpx.post(f"{provider.issuer}/oauth2/token", params=values)
        assert refused.status_code == 400, refused.text


class TestTheDevelopmentUsersCannotBeEdited:
    def test_put_users_cannot_grant_admin(self, provider: DevIdentityProvider) -> None:
        claims = {"realm_access": {"roles": ["admin", "user"]}, "preferred_username": "alice"}
        response = httpx.put(f"{provider.issuer}/users/alice", json=claims)
        assert response.status_code == 403, response.text
        created = httpx.put(f"{provider.issuer}/users/mallory", json=claims)
        assert created.status_code == 403, created.text
        from calcgraph.auth.devidp import sign_in

        token = sign_in(provider.issuer, "alice")["access_token"]
        roles = jwt.decode(token, options={"verify_signature": False})["realm_access"]["roles"]
        assert "admin" not in roles


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Impostor(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        body = json.dumps({"issuer": issuer, "proof": "0" * 64}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class TestServeTrustsOnlyItsOwnProvider:
    def test_another_server_on_the_port_is_refused(self, tmp_path: Path) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", _free_port()), _Impostor)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            port = int(server.server_address[1])
            with pytest.raises(ValueError, match="not the development identity provider"):
                start_for_serve("calcgraph-api", "127.0.0.1", port)
        finally:
            server.shutdown()
            server.server_close()

    def test_its_own_provider_is_shared(self) -> None:
        port = _free_port()
        started = start_for_serve("calcgraph-api", "127.0.0.1", port)
        assert started is not None
        try:
            # (Its own thread waits for it to start: here, until it answers.)
            deadline = time.monotonic() + 30
            while not _answers(f"http://127.0.0.1:{port}"):
                assert time.monotonic() < deadline, "the provider never answered"
                time.sleep(0.05)
            assert proof_file(port).stat().st_mode & 0o077 == 0
            assert start_for_serve("calcgraph-api", "127.0.0.1", port) is None
        finally:
            started.stop()
            proof_file(port).unlink(missing_ok=True)
