"""One OpenID provider as the API sees it: its discovery document and its signing keys.

Keys are cached. A token signed with an unknown `kid` triggers a refetch, but at most one per
`refetch_interval` and only one at a time (single flight), so a flood of tokens with random
`kid`s costs the identity provider one request per interval, not one per token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from jwt.algorithms import RSAAlgorithm

from calcgraph.domain.errors import Unavailable

log = logging.getLogger("calcgraph.auth")

HTTP_TIMEOUT = 5.0


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    jwks_uri: str
    authorization_endpoint: str | None
    token_endpoint: str | None


def _rsa_keys(document: Any) -> dict[str, RSAPublicKey]:
    keys: dict[str, RSAPublicKey] = {}
    entries = document.get("keys") if isinstance(document, dict) else None
    for jwk in entries if isinstance(entries, list) else []:
        if not isinstance(jwk, dict) or jwk.get("kty") != "RSA":
            continue
        kid = jwk.get("kid")
        # Keycloak also publishes encryption keys; only signing keys for RS256 verify tokens.
        if not isinstance(kid, str) or jwk.get("use", "sig") != "sig":
            continue
        if jwk.get("alg", "RS256") != "RS256":
            continue
        public = {k: v for k, v in jwk.items() if k not in ("d", "p", "q", "dp", "dq", "qi")}
        try:
            key = RSAAlgorithm.from_jwk(json.dumps(public))
        except Exception:  # a malformed key in the set must not hide the valid ones
            log.warning("ignoring a malformed JWK %r from the identity provider", kid)
            continue
        if isinstance(key, RSAPublicKey):
            keys[kid] = key
    return keys


class OidcProvider:
    def __init__(
        self,
        issuer: str,
        *,
        refetch_interval: float = 5.0,
        max_age: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.refetch_interval = refetch_interval
        self.max_age = max_age
        self._clock = clock
        self._metadata: ProviderMetadata | None = None
        self._keys: dict[str, RSAPublicKey] = {}
        self._fetched_at: float | None = None
        # Two locks: a key refresh holds its own while it may need the discovery document.
        self._keys_lock: asyncio.Lock | None = None
        self._discovery_lock: asyncio.Lock | None = None
        self._tls: ssl.SSLContext | None = None

    def _lock_for_keys(self) -> asyncio.Lock:
        if self._keys_lock is None:
            self._keys_lock = asyncio.Lock()
        return self._keys_lock

    def _lock_for_discovery(self) -> asyncio.Lock:
        if self._discovery_lock is None:
            self._discovery_lock = asyncio.Lock()
        return self._discovery_lock

    async def _get_json(self, url: str) -> Any:
        # A short-lived client: fetches are rare (throttled), and nothing is left to close. Its
        # TLS context is built once, on a thread: loading the CA bundle took 146-398 ms of the
        # event loop at each fetch in the soak of issue 27 (a client builds one even for http).
        if self._tls is None:
            self._tls = await asyncio.to_thread(httpx.create_ssl_context)
        async with httpx.AsyncClient(
            timeout=HTTP_TIMEOUT, follow_redirects=False, verify=self._tls
        ) as http:
            response = await http.get(url, headers={"Accept": "application/json"})
            response.raise_for_status()
            return response.json()

    async def metadata(self) -> ProviderMetadata:
        if self._metadata is not None:
            return self._metadata
        async with self._lock_for_discovery():
            if self._metadata is None:
                self._metadata = await self._discover()
        return self._metadata

    async def _discover(self) -> ProviderMetadata:
        url = f"{self.issuer}/.well-known/openid-configuration"
        try:
            document = await self._get_json(url)
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("OpenID discovery at %s failed: %s", url, exc)
            raise Unavailable("the identity provider is unreachable; retry later") from None
        issuer = document.get("issuer") if isinstance(document, dict) else None
        jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
        # OpenID Connect Discovery 1.0, section 4.3: the issuer in the document must be
        # exactly the one configured, or tokens could be accepted from a different provider.
        if issuer != self.issuer or not isinstance(jwks_uri, str):
            log.error("discovery document of %s names issuer %r", self.issuer, issuer)
            raise Unavailable("the identity provider's discovery document is inconsistent")
        return ProviderMetadata(
            issuer=issuer,
            jwks_uri=jwks_uri,
            authorization_endpoint=document.get("authorization_endpoint"),
            token_endpoint=document.get("token_endpoint"),
        )

    async def key(self, kid: str) -> RSAPublicKey | None:
        """The signing key `kid`, refetching the key set when it is unknown or stale, at most
        once per refetch interval and never concurrently."""
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at > self.max_age
        if kid in self._keys and not stale:
            return self._keys[kid]
        async with self._lock_for_keys():
            # Another request may have refreshed the set while this one waited for the lock.
            now = self._clock()
            throttled = (
                self._fetched_at is not None and now - self._fetched_at < self.refetch_interval
            )
            if not throttled:
                await self._refresh(now)
            elif self._metadata is None:
                raise Unavailable("the identity provider is unreachable; retry later")
        return self._keys.get(kid)

    async def _refresh(self, now: float) -> None:
        # Failures count as fetches too: an unreachable provider is not hammered either.
        self._fetched_at = now
        metadata = await self.metadata()
        try:
            keys = _rsa_keys(await self._get_json(metadata.jwks_uri))
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("fetching the JWKS at %s failed: %s", metadata.jwks_uri, exc)
            if not self._keys:
                raise Unavailable("the identity provider's keys are unavailable") from None
            return
        self._keys = keys
