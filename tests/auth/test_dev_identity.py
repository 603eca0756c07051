"""The development identity provider from outside: `calcgraph token`, `calcgraph serve`
running the provider on loopback, and the refusals off loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from calcgraph.auth.devidp import DevIdentityProvider
from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.verify import TokenVerifier


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    base["CALCGRAPH_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'dev.db'}"
    return base | {f"CALCGRAPH_{k.upper()}": v for k, v in extra.items()}


def calcgraph(*args: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "calcgraph", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def provider() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider("calcgraph-api", port=free_port()) as running:
        yield running


def port_of(provider: DevIdentityProvider) -> str:
    return provider.issuer.rsplit(":", 1)[1]


class TestTokenCommand:
    async def test_prints_a_valid_token_with_the_users_roles(
        self, provider: DevIdentityProvider, tmp_path: Path
    ) -> None:
        result = calcgraph(
            "token", "admin", environment=env(tmp_path, dev_idp_port=port_of(provider))
        )
        assert result.returncode == 0, result.stderr
        token = result.stdout.strip()
        verifier = TokenVerifier(OidcProvider(provider.issuer), "calcgraph-api")
        claims = await verifier.verify(token)
        assert claims["preferred_username"] == "admin"
        assert claims["realm_access"]["roles"] == ["admin", "user"]

    def test_unknown_user_is_refused(self, provider: DevIdentityProvider, tmp_path: Path) -> None:
        result = calcgraph(
            "token", "mallory", environment=env(tmp_path, dev_idp_port=port_of(provider))
        )
        assert result.returncode == 2
        assert "unknown development user" in result.stderr

    def test_refused_off_loopback(self, provider: DevIdentityProvider, tmp_path: Path) -> None:
        environment = env(tmp_path, dev_idp_port=port_of(provider), host="0.0.0.0")
        result = calcgraph("token", "alice", environment=environment)
        assert result.returncode == 2
        assert "not loopback" in result.stderr

    def test_refused_with_a_real_issuer(self, tmp_path: Path) -> None:
        environment = env(tmp_path, oidc_issuer="https://id.example/realms/calcgraph")
        result = calcgraph("token", "alice", environment=environment)
        assert result.returncode == 2
        assert "development identity provider only" in result.stderr

    def test_waits_for_a_provider_that_is_still_starting(self, tmp_path: Path) -> None:
        """`serve` answers /health before its provider listens: a token asked for at once
        waits for the provider instead of failing."""
        port = free_port()
        environment = env(tmp_path, dev_idp_port=str(port))
        asking = subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "token", "alice"],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        assert asking.poll() is None, asking.communicate()
        with DevIdentityProvider("calcgraph-api", port=port):
            out, err = asking.communicate(timeout=60)
        assert asking.returncode == 0, err
        assert out.strip().count(".") == 2  # a JWT

    def test_says_when_the_provider_is_not_running(self, tmp_path: Path) -> None:
        result = calcgraph("token", "alice", environment=env(tmp_path, dev_idp_port="9"))
        assert result.returncode == 2
        assert "start `calcgraph serve` first" in result.stderr


class TestServe:
    def test_refuses_a_non_loopback_host_without_an_issuer(self, tmp_path: Path) -> None:
        result = calcgraph("serve", "--host", "0.0.0.0", environment=env(tmp_path))
        assert result.returncode == 2
        assert "loopback" in result.stderr

    def test_serve_runs_the_provider_and_accepts_its_tokens(self, tmp_path: Path) -> None:
        api_port, idp_port = free_port(), free_port()
        environment = env(tmp_path, dev_idp_port=str(idp_port))
        log = tmp_path / "serve.log"
        with log.open("w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "calcgraph", "serve", "--port", str(api_port)],
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        try:
            base = f"http://127.0.0.1:{api_port}"
            deadline = time.monotonic() + 60
            # serve answers /health while it starts, and launches the provider beside it: wait
            # for both (the provider's discovery document says it signs in).
            discovery = f"http://127.0.0.1:{idp_port}/.well-known/openid-configuration"
            while True:
                try:
                    if (
                        httpx.get(f"{base}/health", timeout=1).status_code == 200
                        and httpx.get(discovery, timeout=1).status_code == 200
                    ):
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            issued = calcgraph("token", "bob", environment=environment)
            assert issued.returncode == 0, issued.stderr
            token = issued.stdout.strip()
            me = httpx.get(f"{base}/auth/me", headers={"Authorization": f"Bearer {token}"})
            assert me.status_code == 200, (me.text, log.read_text())
            assert me.json()["username"] == "bob"
            assert httpx.get(f"{base}/auth/me").status_code == 401
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        # The provider process goes away with serve (it notices its parent's end on stdin).
        assert provider_stops(f"http://127.0.0.1:{idp_port}", within=10)


def provider_stops(issuer: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1)
        except httpx.HTTPError:
            return True
        time.sleep(0.1)
    return False


# The provider's process ignores authlib's deprecation warnings (devidp_server.main); here too.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_provider_signs_access_tokens_with_the_key_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Minting an access token loads no key: loading an RSA key checks it (0.18 s of CPU), and
    a PEM of the key the provider holds was loaded again for every sign-in."""
    import jwt.algorithms

    from calcgraph.auth.devidp import DEV_REDIRECT_URI
    from calcgraph.auth.devidp_server import build_app

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a private key was loaded to sign an access token")

    monkeypatch.setattr(jwt.algorithms, "load_pem_private_key", refuse)
    client = build_app("calcgraph-api").test_client()
    authorize = client.post(
        "/oauth2/authorize",
        query_string={
            "response_type": "code",
            "client_id": "calcgraph-dev",
            "redirect_uri": DEV_REDIRECT_URI,
            "scope": "openid",
            "state": "s",
        },
        data={"sub": "alice"},
    )
    code = parse_qs(urlsplit(authorize.headers["Location"]).query)["code"][0]
    token = client.post(
        "/oauth2/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": DEV_REDIRECT_URI,
            "client_id": "calcgraph-dev",
            "client_secret": "development",
        },
    )
    assert token.status_code == 200, token.text
    access = token.json["access_token"]
    jwks = client.get("/jwks").json
    key = jwt.PyJWK(jwks["keys"][0])
    claims = jwt.decode(access, key, algorithms=["RS256"], audience="calcgraph-api")
    assert claims["preferred_username"] == "alice"
