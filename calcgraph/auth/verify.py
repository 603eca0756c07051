"""Bearer token verification: RS256 only, signed by a key of the issuer's JWKS.

Everything refused here becomes 401 `Unauthenticated`. The header is inspected before any
key lookup so that a hostile header (alg `none`, HS256, embedded keys) never costs a fetch.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jwt

from calcgraph.auth.provider import OidcProvider
from calcgraph.domain.errors import Unauthenticated

ALGORITHM = "RS256"
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]
# Headers that point at keys other than the issuer's JWKS: honouring them would let a token
# bring its own key. PyJWT ignores them; refusing them outright keeps the intent visible.
FOREIGN_KEY_HEADERS = ("jwk", "jku", "x5u", "x5c", "x5t", "x5t#S256")
MAX_KID_LENGTH = 200
MAX_TOKEN_BYTES = 16 * 1024  # contract section 3
# RFC 7519 section 2: NumericDate is a JSON number. PyJWT takes int() of whatever it finds, so
# a numeric string would pass its checks.
TIME_CLAIMS = ("exp", "nbf", "iat")
# A client polling a run sends the same token several times a second, and the RS256 signature
# check is the largest single cost of an idle tick. A token whose signature verified is taken
# again by its digest, while the key that verified it is still the issuer's key for its kid (a
# retired key stops its tokens at once), until the sooner of its expiry and MEMO_SECONDS;
# the memo is bounded and per process.
MEMO_SECONDS = 60.0
MEMO_SIZE = 10_000


@dataclass(eq=False)
class Verified:
    """A token whose signature verified, as the memo keeps it: its claims (read-only) and what
    a caller derived from them once (the authenticator's principal), taken again with them
    while the memo holds the token."""

    claims: Mapping[str, Any]
    derived: dict[str, object] = field(default_factory=dict)


class TokenVerifier:
    def __init__(self, provider: OidcProvider, audience: str, leeway: float = 30.0) -> None:
        self.provider = provider
        self.audience = audience
        self.leeway = leeway
        # digest of the token -> (what verified, the key that verified it, its kid, monotonic
        # deadline)
        self._memo: OrderedDict[bytes, tuple[Verified, object, str, float]] = OrderedDict()

    async def verify(self, token: str) -> dict[str, Any]:
        """The claims of a valid access token, or Unauthenticated saying what is wrong."""
        return dict((await self.verified(token)).claims)

    async def verified(self, token: str) -> Verified:
        """A valid access token's claims, the same object while the memo holds the token (so
        what a caller derives from them once is kept with them), or Unauthenticated."""
        if len(token) > MAX_TOKEN_BYTES:
            raise Unauthenticated(f"the bearer token is longer than {MAX_TOKEN_BYTES} bytes")
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        remembered = self._memo.get(digest)
        if remembered is not None:
            # The same bytes passed every header check below when they were first verified:
            # only the key (still the issuer's for the kid?) and the deadline are asked again,
            # without parsing the header (a tenth of an idle tick's verification cost).
            verified, by_key, known_kid, deadline = remembered
            if time.monotonic() < deadline and by_key is await self.provider.key(known_kid):
                self._memo.move_to_end(digest)
                return verified
            del self._memo[digest]
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the bearer token is not a well-formed JWT") from None
        if header.get("alg") != ALGORITHM:
            raise Unauthenticated(f"only {ALGORITHM} tokens are accepted")
        if any(name in header for name in FOREIGN_KEY_HEADERS):
            raise Unauthenticated("tokens that carry or point at their own key are refused")
        if "crit" in header:
            raise Unauthenticated("the token has critical header extensions this service lacks")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid or len(kid) > MAX_KID_LENGTH:
            raise Unauthenticated("the token names no signing key (kid)")
        key = await self.provider.key(kid)
        if key is None:
            raise Unauthenticated("the token is signed by a key the identity provider lacks")
        claims = self._decode(token, key)
        # Until the token's own expiry, without the leeway a fresh check allows.
        lifetime = min(MEMO_SECONDS, float(claims["exp"]) - time.time())
        verified = Verified(MappingProxyType(claims))
        if lifetime > 0:
            self._memo[digest] = (verified, key, kid, time.monotonic() + lifetime)
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return verified

    def _decode(self, token: str, key: Any) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[ALGORITHM],
                audience=self.audience,
                issuer=self.provider.issuer,
                leeway=self.leeway,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("the token is not valid yet") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"the token lacks the {exc.claim!r} claim") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated(f"the token is not meant for {self.audience!r}") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("the token comes from another issuer") from None
        except jwt.InvalidSignatureError:
            raise Unauthenticated("the token's signature does not verify") from None
        except jwt.PyJWTError:
            raise Unauthenticated("the bearer token is invalid") from None
        for name in TIME_CLAIMS:
            value = claims.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise Unauthenticated(f"the token's {name!r} claim is not a number of seconds")
        # Keycloak marks the kind of token in `typ`: refresh and ID tokens are signed by the
        # same keys but are not credentials for an API.
        typ = claims.get("typ")
        if typ is not None and typ != "Bearer":
            raise Unauthenticated(f"a {typ} token is not an access token")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise Unauthenticated("the token's subject is empty")
        return claims
