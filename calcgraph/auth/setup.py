"""Wires the identity adapters of one application from its settings: the provider, the
token authenticator and the sign-in flow that holds both."""

from __future__ import annotations

from calcgraph.auth.authenticate import Authenticator
from calcgraph.auth.issuer import require_https
from calcgraph.auth.login import LoginFlow
from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.verify import TokenVerifier
from calcgraph.db.engine import Database
from calcgraph.settings import Settings

__all__ = ["build_identity", "require_https"]


def build_identity(settings: Settings, database: Database) -> LoginFlow:
    require_https(settings.issuer)
    provider = OidcProvider(settings.issuer, refetch_interval=settings.oidc_jwks_refetch_seconds)
    verifier = TokenVerifier(provider, settings.oidc_audience, settings.oidc_leeway_seconds)
    authenticator = Authenticator(verifier, database)
    return LoginFlow(
        provider=provider,
        authenticator=authenticator,
        database=database,
        client_id=settings.login_client_id,
        client_secret=settings.login_client_secret,
        redirect_uri=settings.oidc_redirect_uri,
        scopes=settings.oidc_scopes,
    )
