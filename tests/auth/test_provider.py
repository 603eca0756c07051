"""Discovery, the JWKS cache, key rotation and the refetch throttle, against a real provider
on loopback. The clock is injected so seconds pass without waiting for them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.setup import require_https
from calcgraph.auth.verify import TokenVerifier
from calcgraph.domain.errors import Unauthenticated, Unavailable
from tests.auth.idp import AUDIENCE, LocalIdentityProvider, new_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def idp() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def verifier(idp: LocalIdentityProvider, clock: Clock) -> TokenVerifier:
    return TokenVerifier(OidcProvider(idp.issuer, clock=clock), AUDIENCE, leeway=30)


STRANGER_KEY = new_key()


def unknown_kid_token(idp: LocalIdentityProvider) -> str:
    return idp.sign(idp.claims(), kid=uuid.uuid4().hex, key=STRANGER_KEY)


class TestCache:
    async def test_keys_are_fetched_once_and_cached(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier
    ) -> None:
        for _ in range(5):
            claims = await verifier.verify(idp.token("alice"))
            assert claims["preferred_username"] == "alice"
        assert idp.discovery_hits == 1
        assert idp.jwks_hits == 1

    async def test_discovery_must_name_the_configured_issuer(
        self, idp: LocalIdentityProvider
    ) -> None:
        provider = OidcProvider(idp.issuer + "/realms/other")
        with pytest.raises(Unavailable):
            await provider.metadata()

    async def test_unreachable_provider_is_unavailable_not_unauthenticated(
        self, idp: LocalIdentityProvider
    ) -> None:
        verifier = TokenVerifier(OidcProvider("http://127.0.0.1:9"), AUDIENCE)
        with pytest.raises(Unavailable):
            await verifier.verify(idp.token())


class TestRefetchThrottle:
    async def test_a_flood_of_unknown_kids_costs_one_fetch(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, clock: Clock
    ) -> None:
        await verifier.verify(idp.token())
        assert idp.jwks_hits == 1
        clock.now += 31
        results = await asyncio.gather(
            *(verifier.verify(unknown_kid_token(idp)) for _ in range(40)), return_exceptions=True
        )
        assert all(isinstance(r, Unauthenticated) for r in results)
        assert idp.jwks_hits == 2, "concurrent unknown kids share one refetch"
        for _ in range(10):
            with pytest.raises(Unauthenticated):
                await verifier.verify(unknown_kid_token(idp))
        assert idp.jwks_hits == 2, "no second refetch within the 5 s interval"

    async def test_next_refetch_after_the_interval(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, clock: Clock
    ) -> None:
        with pytest.raises(Unauthenticated):
            await verifier.verify(unknown_kid_token(idp))
        assert idp.jwks_hits == 1
        clock.now += 4.5
        with pytest.raises(Unauthenticated):
            await verifier.verify(unknown_kid_token(idp))
        assert idp.jwks_hits == 1, "no refetch within 5 s (contract section 3)"
        clock.now += 1
        with pytest.raises(Unauthenticated):
            await verifier.verify(unknown_kid_token(idp))
        assert idp.jwks_hits == 2

    async def test_refetches_load_the_certificate_authorities_once(
        self,
        idp: LocalIdentityProvider,
        verifier: TokenVerifier,
        clock: Clock,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Each fetch used to build a TLS context (the CA bundle read and parsed: 60 ms here
        idle, 146-398 ms of the event loop in the soak of issue 27), however rarely."""
        built: list[object] = []
        create = httpx.create_ssl_context

        def counted(*args: Any, **kwargs: Any) -> Any:
            built.append(1)
            return create(*args, **kwargs)

        monkeypatch.setattr(httpx, "create_ssl_context", counted)
        fresh = TokenVerifier(OidcProvider(idp.issuer, clock=clock), AUDIENCE, leeway=30)
        for _ in range(3):
            clock.now += 6
            with pytest.raises(Unauthenticated):
                await fresh.verify(unknown_kid_token(idp))
        assert idp.jwks_hits == 3
        assert idp.discovery_hits == 1
        assert len(built) == 1


class TestRotation:
    async def test_a_new_kid_verifies_after_one_refetch(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, clock: Clock
    ) -> None:
        await verifier.verify(idp.token())
        clock.now += 31
        idp.rotate()
        claims = await verifier.verify(idp.token("bob"))
        assert claims["preferred_username"] == "bob"
        assert idp.jwks_hits == 2
        await verifier.verify(idp.token("bob"))
        assert idp.jwks_hits == 2

    async def test_a_retired_key_stops_verifying_once_the_set_is_refetched(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, clock: Clock
    ) -> None:
        old = idp.token()
        await verifier.verify(old)
        clock.now += 31
        idp.rotate()
        await verifier.verify(idp.token())
        with pytest.raises(Unauthenticated):
            await verifier.verify(old)

    async def test_rotation_within_the_throttle_waits_for_the_interval(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, clock: Clock
    ) -> None:
        await verifier.verify(idp.token())
        idp.rotate()
        with pytest.raises(Unauthenticated):
            await verifier.verify(idp.token())
        clock.now += 30.5
        await verifier.verify(idp.token())
        assert idp.jwks_hits == 2


class TestHttps:
    @pytest.mark.parametrize(
        "issuer",
        ["https://id.example/realms/calcgraph", "http://127.0.0.1:8400", "http://localhost:1"],
    )
    def test_accepted(self, issuer: str) -> None:
        require_https(issuer)

    @pytest.mark.parametrize(
        "issuer", ["http://id.example/realms/calcgraph", "ftp://127.0.0.1", "id.example"]
    )
    def test_refused(self, issuer: str) -> None:
        with pytest.raises(ValueError, match="https"):
            require_https(issuer)


class TestVerifiedTokenMemo:
    """A token whose signature verified is taken again without the RSA check; nothing that
    would refuse it on a fresh check may be skipped for it."""

    async def test_a_remembered_token_expires_with_the_token(
        self, idp: LocalIdentityProvider, clock: Clock
    ) -> None:
        strict = TokenVerifier(OidcProvider(idp.issuer, clock=clock), AUDIENCE, leeway=0)
        claims = idp.claims()
        claims["exp"] = claims["iat"] + 2
        token = idp.sign(claims)
        assert (await strict.verify(token))["sub"] == "sub-alice"
        assert (await strict.verify(token))["sub"] == "sub-alice"
        await asyncio.sleep(2.5)
        with pytest.raises(Unauthenticated, match="expired"):
            await strict.verify(token)

    async def test_an_altered_copy_of_a_remembered_token_is_refused(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier
    ) -> None:
        token = idp.token()
        await verifier.verify(token)
        head, payload, signature = token.split(".")
        forged = f"{head}.{payload}.{signature[:-4]}AAAA"
        with pytest.raises(Unauthenticated):
            await verifier.verify(forged)
        other = idp.claims("mallory", roles=["admin"])
        with pytest.raises(Unauthenticated):
            await verifier.verify(f"{head}.{idp.sign(other).split('.')[1]}.{signature}")

    async def test_the_memo_answers_what_a_fresh_check_answers_and_stays_bounded(
        self, idp: LocalIdentityProvider, verifier: TokenVerifier, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr("calcgraph.auth.verify.MEMO_SIZE", 3)
        tokens = [idp.token(name) for name in ("ann", "ben", "cat", "dan", "eve")]
        first = [await verifier.verify(token) for token in tokens]
        again = [await verifier.verify(token) for token in tokens]
        assert first == again
        again[0]["sub"] = "changed by a caller"
        assert (await verifier.verify(tokens[0]))["sub"] == "sub-ann"
        assert len(verifier._memo) == 3

    async def test_what_a_caller_derives_is_kept_with_the_token_and_never_outlives_it(
        self, idp: LocalIdentityProvider, clock: Clock
    ) -> None:
        strict = TokenVerifier(OidcProvider(idp.issuer, clock=clock), AUDIENCE, leeway=0)
        claims = idp.claims()
        claims["exp"] = claims["iat"] + 2
        token, other = idp.sign(claims), idp.token("bob")
        first = await strict.verified(token)
        first.derived["principal"] = "alice's principal"
        again = await strict.verified(token)
        assert again is first
        assert again.derived == {"principal": "alice's principal"}
        assert (await strict.verified(other)).derived == {}
        with pytest.raises(TypeError):
            again.claims["sub"] = "mallory"  # type: ignore[index]
        await asyncio.sleep(2.5)
        with pytest.raises(Unauthenticated, match="expired"):
            await strict.verified(token)
