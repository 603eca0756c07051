"""Wires the identity adapters of one application from its settings."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from calcgraph.auth.authenticate import Authenticator
from calcgraph.auth.devidp import is_loopback
from calcgraph.auth.login import LoginFlow
from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.verify import TokenVerifier
from calcgraph.db.engine import Database
from calcgraph.settings import Settings


@dataclass(frozen=True)
class IdentityAdapters:
    provider: OidcProvider
    authenticator: Authenticator
    login: LoginFlow


def require_https(issuer: str) -> None:
    """Specification, Authentication 9: production requires HTTPS. Plain HTTP is only for an
    identity provider on this machine (the development one, tests)."""
    parts = urlsplit(issuer)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback(parts.hostname or ""):
        return
    raise ValueError(f"CALCGRAPH_OIDC_ISSUER must be an https:// URL (or loopback), not {issuer}")


def build_identity(settings: Settings, database: Database) -> IdentityAdapters:
    require_https(settings.issuer)
    provider = OidcProvider(settings.issuer, refetch_interval=settings.oidc_jwks_refetch_seconds)
    verifier = TokenVerifier(provider, settings.oidc_audience, settings.oidc_leeway_seconds)
    authenticator = Authenticator(verifier, database)
    login = LoginFlow(
        provider=provider,
        authenticator=authenticator,
        database=database,
        client_id=settings.login_client_id,
        client_secret=settings.login_client_secret,
        redirect_uri=settings.oidc_redirect_uri,
        scopes=settings.oidc_scopes,
    )
    return IdentityAdapters(provider=provider, authenticator=authenticator, login=login)
