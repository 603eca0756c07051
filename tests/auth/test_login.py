"""POST /auth/login and /auth/callback through the whole code flow, without a browser,
against a real OpenID provider process (the development provider, oidc-provider-mock)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from calcgraph.app import create_app
from calcgraph.auth.devidp import DevIdentityProvider
from calcgraph.db.engine import Database
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider


@pytest.fixture(scope="module")
def provider() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider("calcgraph-api") as running:
        yield running


@pytest.fixture
async def login_client(
    provider: DevIdentityProvider, database_url: str, database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(  # type: ignore[call-arg]
        database_url=database_url,
        oidc_issuer=provider.issuer,
        oidc_client_id="calcgraph-dashboard",
        oidc_client_secret="api-client-secret",
        oidc_redirect_uri="http://127.0.0.1:5173/callback",
        _env_file=None,
    )
    transport = httpx.ASGITransport(app=create_app(settings, database))
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


def sign_in_at_the_provider(authorization_url: str, username: str) -> dict[str, list[str]]:
    """What the browser does: submit the provider's sign-in form, read the redirect."""
    response = httpx.post(authorization_url, data={"sub": username})
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith("http://127.0.0.1:5173/callback?")
    return parse_qs(urlsplit(location).query)


async def test_login_returns_an_authorization_url_with_pkce(
    login_client: httpx.AsyncClient, provider: DevIdentityProvider
) -> None:
    response = await login_client.post("/auth/login")
    assert response.status_code == 200
    body = response.json()
    url = urlsplit(body["authorization_url"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{provider.issuer}/oauth2/authorize"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query["response_type"] == "code"
    assert query["client_id"] == "calcgraph-dashboard"
    assert query["redirect_uri"] == "http://127.0.0.1:5173/callback"
    assert query["code_challenge_method"] == "S256"
    assert query["state"] == body["state"]
    verifier = body["code_verifier"]
    assert 43 <= len(verifier) <= 128
    digest = hashlib.sha256(verifier.encode()).digest()
    assert query["code_challenge"] == base64.urlsafe_b64encode(digest).decode().rstrip("=")


async def test_the_whole_code_flow(login_client: httpx.AsyncClient) -> None:
    start = (await login_client.post("/auth/login")).json()
    redirect = sign_in_at_the_provider(start["authorization_url"], "admin")
    assert redirect["state"] == [start["state"]]

    response = await login_client.post(
        "/auth/callback",
        json={"code": redirect["code"][0], "code_verifier": start["code_verifier"]},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["user"]["username"] == "admin"
    assert body["user"]["roles"] == ["admin", "user"]
    assert body["user"]["email"] == "admin@calcgraph.dev"

    me = await login_client.get(
        "/auth/me", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert me.status_code == 200
    assert me.json()["username"] == "admin"


async def test_a_code_is_used_once(login_client: httpx.AsyncClient) -> None:
    start = (await login_client.post("/auth/login")).json()
    code = sign_in_at_the_provider(start["authorization_url"], "bob")["code"][0]
    body = {"code": code, "code_verifier": start["code_verifier"]}
    assert (await login_client.post("/auth/callback", json=body)).status_code == 200
    again = await login_client.post("/auth/callback", json=body)
    assert again.status_code == 400
    assert again.json()["detail"].startswith("InvalidRequest: ")


async def test_a_wrong_verifier_is_refused_and_the_code_stays_for_the_right_one(
    login_client: httpx.AsyncClient,
) -> None:
    """Someone who intercepted the code but not the verifier gets no token (RFC 7636)."""
    start = (await login_client.post("/auth/login")).json()
    code = sign_in_at_the_provider(start["authorization_url"], "bob")["code"][0]
    right = start["code_verifier"]
    one_off = right[:-1] + ("y" if right.endswith("x") else "x")
    for verifier in ("w" * 64, one_off):
        body = {"code": code, "code_verifier": verifier}
        refused = await login_client.post("/auth/callback", json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == (
            "InvalidRequest: the identity provider refused the code: invalid_grant"
        )
    body = {"code": code, "code_verifier": right}
    assert (await login_client.post("/auth/callback", json=body)).status_code == 200


def test_the_provider_refuses_a_code_with_a_challenge_and_no_verifier(
    provider: DevIdentityProvider,
) -> None:
    verifier = "v" * 50
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    params = {
        "response_type": "code",
        "client_id": "calcgraph-dashboard",
        "redirect_uri": "http://127.0.0.1:5173/callback",
        "scope": "openid",
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
    }
    url = httpx.URL(f"{provider.issuer}/oauth2/authorize", params=params)
    code = sign_in_at_the_provider(str(url), "alice")["code"][0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1:5173/callback",
        "client_id": "calcgraph-dashboard",
        "client_secret": "api-client-secret",
    }
    refused = httpx.post(f"{provider.issuer}/oauth2/token", data=form)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    granted = httpx.post(f"{provider.issuer}/oauth2/token", data=form | {"code_verifier": verifier})
    assert granted.status_code == 200, granted.text
    assert granted.json()["token_type"].lower() == "bearer"


async def test_callback_validates_its_body(login_client: httpx.AsyncClient) -> None:
    response = await login_client.post("/auth/callback", json={"code": "x"})
    assert response.status_code == 422


async def test_dev_provider_tokens_are_refused_by_an_api_with_another_audience(
    provider: DevIdentityProvider, database_url: str, database: Database
) -> None:
    from calcgraph.auth.devidp import dev_token

    settings = Settings(  # type: ignore[call-arg]
        database_url=database_url,
        oidc_issuer=provider.issuer,
        oidc_audience="another-api",
        _env_file=None,
    )
    token = dev_token(provider.issuer, "alice")
    transport = httpx.ASGITransport(app=create_app(settings, database))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


class TestConfidentialClient:
    @pytest.fixture
    async def client_with_secret(
        self, identity_provider: LocalIdentityProvider, database_url: str, database: Database
    ) -> AsyncIterator[httpx.AsyncClient]:
        settings = Settings(  # type: ignore[call-arg]
            database_url=database_url,
            oidc_issuer=identity_provider.issuer,
            oidc_client_id="calcgraph-api",
            oidc_client_secret="the-secret",
            _env_file=None,
        )
        transport = httpx.ASGITransport(app=create_app(settings, database))
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as c:
            yield c

    async def test_the_exchange_sends_secret_verifier_and_redirect(
        self, client_with_secret: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        verifier = "v" * 64
        response = await client_with_secret.post(
            "/auth/callback", json={"code": "good", "code_verifier": verifier}
        )
        assert response.status_code == 200, response.text
        assert response.json()["user"]["username"] == "carol"
        sent = identity_provider.token_requests[-1]
        assert sent == {
            "grant_type": "authorization_code",
            "code": "good",
            "code_verifier": verifier,
            "client_id": "calcgraph-api",
            "client_secret": "the-secret",
            "redirect_uri": "http://api.test/auth/callback-page",
        }

    async def test_a_refused_code_is_400(self, client_with_secret: httpx.AsyncClient) -> None:
        response = await client_with_secret.post(
            "/auth/callback", json={"code": "bad", "code_verifier": "v" * 64}
        )
        assert response.status_code == 400
        assert "invalid_grant" in response.json()["detail"]

    async def test_login_uses_the_default_redirect(
        self, client_with_secret: httpx.AsyncClient
    ) -> None:
        body = (await client_with_secret.post("/auth/login")).json()
        assert body["redirect_uri"] == "http://api.test/auth/callback-page"
