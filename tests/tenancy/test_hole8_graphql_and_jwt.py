"""Issue 12, hole 8 (GraphQL and JWT items) and issue 15's key rotation: an undefined fragment
is named in the answer, a JWT whose `exp` (or `nbf`, `iat`) is a string is refused, and an
unknown `kid` refetches the key set after 5 s (contract section 3), one fetch at a time."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.verify import TokenVerifier
from calcgraph.settings import Settings
from tests.auth.idp import AUDIENCE, LocalIdentityProvider, new_key

pytestmark = pytest.mark.db


class TestUndefinedFragment:
    async def test_the_answer_names_it(self, client: httpx.AsyncClient) -> None:
        query = "query { ...X }"
        response = await client.post("/graphql", json={"query": query})
        [error] = response.json()["errors"]
        assert error["extensions"]["code"] == "ValidationError"
        assert "unknown fragment 'X'" in error["message"]
        assert error["message"] != "'X'"

    async def test_inside_another_fragment(self, client: httpx.AsyncClient, bearer: Any) -> None:
        query = "query { ...A } fragment A on Query { me { ...Missing } }"
        response = await client.post("/graphql", json={"query": query}, headers=bearer())
        messages = [e["message"] for e in response.json()["errors"]]
        assert any("unknown fragment 'Missing'" in m for m in messages), messages


class TestTimeClaimsAreNumbers:
    @pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
    async def test_a_numeric_string_is_refused(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider, claim: str
    ) -> None:
        claims = identity_provider.claims()
        claims[claim] = str(claims["iat"] if claim == "nbf" else claims[claim])
        token = identity_provider.sign(claims)
        response = await client.get("/jobs", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401
        assert response.json()["detail"].startswith("Unauthenticated: ")
        assert f"'{claim}' claim is not a number" in response.json()["detail"]
        assert response.headers["WWW-Authenticate"].startswith("Bearer")

    async def test_numbers_are_fine(
        self, client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
    ) -> None:
        claims = identity_provider.claims()
        claims["exp"] = float(claims["exp"])
        token = identity_provider.sign(claims)
        response = await client.get("/jobs", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestUnknownKidRefetch:
    def test_the_default_interval_is_5_seconds(self) -> None:
        assert Settings(_env_file=None).oidc_jwks_refetch_seconds == 5.0  # type: ignore[call-arg]
        assert OidcProvider("http://127.0.0.1:1").refetch_interval == 5.0

    async def test_a_rotated_key_verifies_5_s_after_the_last_fetch(self) -> None:
        idp = LocalIdentityProvider().start()
        try:
            clock = _Clock()
            verifier = TokenVerifier(OidcProvider(idp.issuer, clock=clock), AUDIENCE)
            await verifier.verify(idp.token())
            idp.rotate()
            clock.now += 5.5
            stranger = new_key()
            # A flood of unknown kids at once: one fetch (single flight), the rotated key found.
            results = await asyncio.gather(
                verifier.verify(idp.token("bob")),
                *(
                    verifier.verify(idp.sign(idp.claims(), kid=uuid.uuid4().hex, key=stranger))
                    for _ in range(20)
                ),
                return_exceptions=True,
            )
            assert isinstance(results[0], dict)
            assert results[0]["preferred_username"] == "bob"
            assert idp.jwks_hits == 2
        finally:
            idp.stop()
