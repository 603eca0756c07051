"""The token battery: every hostile token gets 401 `Unauthenticated` with WWW-Authenticate;
a valid token gets 200. Runs over HTTP against the app and a real JWKS endpoint."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from jwt.algorithms import RSAAlgorithm

from tests.auth.idp import LocalIdentityProvider, new_key

ATTACKER_KEY = new_key()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


def unsigned(idp: LocalIdentityProvider, alg: str) -> str:
    header = {"alg": alg, "typ": "JWT", "kid": idp.current_kid}
    return f"{segment(header)}.{segment(idp.claims())}."


def hmac_with_public_key(idp: LocalIdentityProvider, alg: str = "HS256") -> str:
    """The classic confusion: HMAC keyed with the RSA public key the JWKS publishes."""
    public_pem = (
        idp.keys[idp.current_kid]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = {"alg": alg, "typ": "JWT", "kid": idp.current_kid}
    signing_input = f"{segment(header)}.{segment(idp.claims())}"
    digest = hashlib.sha256 if alg == "HS256" else hashlib.sha512
    signature = hmac.new(public_pem, signing_input.encode(), digest).digest()
    return f"{signing_input}.{b64(signature)}"


def with_claims(idp: LocalIdentityProvider, **changes: Any) -> str:
    claims = idp.claims()
    for name, value in changes.items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return idp.sign(claims)


def attacker_jwk() -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(ATTACKER_KEY.public_key()))
    return jwk


def tamper_signature(token: str) -> str:
    head, payload, signature = token.split(".")
    flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    return f"{head}.{payload}.{flipped}"


def tamper_payload(idp: LocalIdentityProvider) -> str:
    head, _, signature = idp.token("mallory").split(".")
    forged = idp.claims("mallory", roles=["admin", "user"])
    return f"{head}.{segment(forged)}.{signature}"


def now() -> int:
    return int(time.time())


HOSTILE: dict[str, Callable[[LocalIdentityProvider], str]] = {
    "alg none": lambda idp: unsigned(idp, "none"),
    "alg None": lambda idp: unsigned(idp, "None"),
    "alg NONE": lambda idp: unsigned(idp, "NONE"),
    "alg nOnE": lambda idp: unsigned(idp, "nOnE"),
    "HS256 keyed with the public key": hmac_with_public_key,
    "HS512 keyed with the public key": lambda idp: hmac_with_public_key(idp, "HS512"),
    "foreign key, known kid": lambda idp: idp.sign(idp.claims(), key=ATTACKER_KEY),
    "foreign key, unknown kid": lambda idp: idp.sign(
        idp.claims(), kid="attacker", key=ATTACKER_KEY
    ),
    "embedded jwk header": lambda idp: idp.sign(
        idp.claims(), key=ATTACKER_KEY, kid="attacker", headers={"jwk": attacker_jwk()}
    ),
    "jku header": lambda idp: idp.sign(
        idp.claims(), key=ATTACKER_KEY, headers={"jku": "http://127.0.0.1:9/jwks"}
    ),
    "x5u header": lambda idp: idp.sign(
        idp.claims(), key=ATTACKER_KEY, headers={"x5u": "http://127.0.0.1:9/cert.pem"}
    ),
    "x5c header": lambda idp: idp.sign(idp.claims(), key=ATTACKER_KEY, headers={"x5c": ["MIIB"]}),
    "kid path traversal": lambda idp: idp.sign(
        idp.claims(), key=ATTACKER_KEY, kid="../../../../../../dev/null"
    ),
    "kid absolute path": lambda idp: idp.sign(idp.claims(), key=ATTACKER_KEY, kid="/etc/passwd"),
    "kid injection": lambda idp: idp.sign(idp.claims(), key=ATTACKER_KEY, kid="' OR '1'='1"),
    "no kid": lambda idp: jwt.encode(idp.claims(), idp.keys[idp.current_kid], algorithm="RS256"),
    "stripped signature": lambda idp: idp.token().rsplit(".", 1)[0] + ".",
    "signature dropped with its dot": lambda idp: idp.token().rsplit(".", 1)[0],
    "altered signature": lambda idp: tamper_signature(idp.token()),
    "altered payload": tamper_payload,
    "expired": lambda idp: with_claims(idp, exp=now() - 120, iat=now() - 400),
    "missing exp": lambda idp: with_claims(idp, exp=None),
    "missing iat": lambda idp: with_claims(idp, iat=None),
    "future nbf": lambda idp: with_claims(idp, nbf=now() + 120),
    "future iat": lambda idp: with_claims(idp, iat=now() + 120),
    "wrong aud": lambda idp: with_claims(idp, aud="another-api"),
    "missing aud": lambda idp: with_claims(idp, aud=None),
    "wrong iss": lambda idp: with_claims(idp, iss="http://127.0.0.1:1/realms/other"),
    "prefixed iss": lambda idp: with_claims(idp, iss="https://evil.example/" + idp.issuer),
    "extended iss": lambda idp: with_claims(idp, iss=idp.issuer + ".evil.example"),
    "missing iss": lambda idp: with_claims(idp, iss=None),
    "missing sub": lambda idp: with_claims(idp, sub=None),
    "empty sub": lambda idp: with_claims(idp, sub=""),
    "Refresh typ": lambda idp: with_claims(idp, typ="Refresh"),
    "ID typ": lambda idp: with_claims(idp, typ="ID"),
    "unknown crit": lambda idp: idp.sign(
        {**idp.claims(), "exp-ext": 1}, headers={"crit": ["exp-ext"], "exp-ext": True}
    ),
    "PS256 with the right key": lambda idp: idp.sign(idp.claims(), algorithm="PS256"),
    "RS512 with the right key": lambda idp: idp.sign(idp.claims(), algorithm="RS512"),
    "one segment": lambda idp: "notajwt",
    "two segments": lambda idp: ".".join(idp.token().split(".")[:2]),
    "four segments": lambda idp: idp.token() + ".AAAA",
    "header not base64": lambda idp: "%%%." + idp.token().split(".", 1)[1],
    "header not JSON": lambda idp: b64(b"not json") + "." + idp.token().split(".", 1)[1],
    "payload not JSON": lambda idp: (
        idp.sign(idp.claims()).split(".")[0] + "." + b64(b"[1,2") + ".AAAA"
    ),
}


def test_the_battery_is_large_enough() -> None:
    assert len(HOSTILE) >= 30


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_token_is_refused(
    name: str, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    token = HOSTILE[name](identity_provider)
    response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401, response.text
    assert response.json()["detail"].startswith("Unauthenticated: ")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header", ["", "Bearer", "Bearer ", "Basic YWxpY2U6c2VjcmV0", "Token abc", "bearer"]
)
async def test_malformed_authorization_header(client: httpx.AsyncClient, header: str) -> None:
    response = await client.get("/auth/me", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_no_token_is_401(client: httpx.AsyncClient) -> None:
    response = await client.get("/auth/me")
    assert response.status_code == 401
    assert response.json()["detail"].startswith("Unauthenticated: ")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_valid_token_is_200(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    response = await client.get("/auth/me", headers=identity_provider.headers("alice"))
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


async def test_lowercase_scheme_is_accepted(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    response = await client.get(
        "/auth/me", headers={"Authorization": f"bearer {identity_provider.token()}"}
    )
    assert response.status_code == 200


class TestLeeway:
    async def test_29_seconds_past_exp_is_accepted(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        # Rounded up: the token is at most 29 s (plus the request's own time) past its expiry.
        token = with_claims(identity_provider, exp=math.ceil(time.time()) - 29, iat=now() - 300)
        response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200

    async def test_31_seconds_past_exp_is_refused(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        token = with_claims(identity_provider, exp=math.floor(time.time()) - 31, iat=now() - 300)
        response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401
        assert "expired" in response.json()["detail"]

    async def test_nbf_within_leeway_is_accepted(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        token = with_claims(identity_provider, nbf=now() + 20)
        response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200

    async def test_audience_list_containing_ours_is_accepted(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        token = with_claims(identity_provider, aud=["account", "calcgraph-api"])
        response = await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
