"""The development identity provider's server process (`python -m calcgraph.auth.devidp_server`).

It is the maintained `oidc-provider-mock` package, which issues opaque access tokens, while
calcgraph needs JWT access tokens with Keycloak's claims. Its token endpoint takes authlib's
documented `OAUTH2_ACCESS_TOKEN_GENERATOR` hook, so the generator below mints them as RS256
JWTs signed with the provider's own key (the one its JWKS publishes), with `aud`,
`typ: Bearer`, `preferred_username` and `realm_access.roles`. The API validates them exactly
as it validates Keycloak's: discovery, JWKS, signature, claims.

It runs as its own process: authlib emits deprecation warnings from request handlers, and a
process keeps them (and Flask's globals) away from the API's interpreter.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
import threading
import time
import uuid
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import flask
import jinja2
import jwt
import werkzeug.serving

from calcgraph.auth.devidp import DEV_USERS, TOKEN_LIFETIME
from calcgraph.auth.issuer import is_loopback
from calcgraph.ops.logs import setup_logging
from calcgraph.settings import get_settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    # Importing authlib puts an "always" filter for its own deprecation warnings ahead of the
    # one above, and the provider's imports trigger two: silence them once it is in place.
    from authlib.deprecate import AuthlibDeprecationWarning  # type: ignore[import-untyped]

    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    import oidc_provider_mock


def _access_token_generator(audience: str, lifetime: timedelta) -> Any:
    def generate(client: Any, grant_type: str, user: Any, scope: str) -> str:
        # The provider's signing key lives in its per-app storage, set on flask.g per request.
        storage = flask.g.oidc_provider_mock_storage
        public = storage.jwk.as_dict()
        private_pem = storage.jwk.as_pem(is_private=True)
        now = int(time.time())
        claims: dict[str, Any] = {
            "realm_access": {"roles": ["user"]},
            **{k: v for k, v in user.claims.items() if k not in ("sub", "iss", "aud", "exp")},
            "iss": flask.request.host_url.rstrip("/"),
            "sub": user.sub,
            "aud": [audience],
            "azp": client.get_client_id(),
            "typ": "Bearer",
            "iat": now,
            "exp": now + int(lifetime.total_seconds()),
            "jti": str(uuid.uuid4()),
            "scope": scope or "",
        }
        claims.setdefault("preferred_username", user.sub)
        return jwt.encode(claims, private_pem, algorithm="RS256", headers={"kid": public["kid"]})

    return generate


TEMPLATES = Path(__file__).with_name("devidp_templates")


def build_app(audience: str, lifetime: timedelta = TOKEN_LIFETIME) -> flask.Flask:
    app = flask.Flask("calcgraph.devidp")
    # The provider's blueprint names no template folder: its pages (the sign-in form) are
    # found through the application's loader. Ours first: a page frame without a CDN.
    app.jinja_loader = jinja2.ChoiceLoader(
        [
            jinja2.FileSystemLoader(TEMPLATES),
            jinja2.PackageLoader("oidc_provider_mock", "templates"),
        ]
    )
    # Read by authlib when the provider registers its token endpoint: set before init_app.
    app.config["OAUTH2_ACCESS_TOKEN_GENERATOR"] = _access_token_generator(audience, lifetime)
    oidc_provider_mock.init_app(
        app,
        access_token_max_age=lifetime,
        user_claims=[
            oidc_provider_mock.User(sub=u.username, claims=u.claims()) for u in DEV_USERS.values()
        ],
    )
    app.secret_key = secrets.token_bytes(16)
    return app


def _exit_with_parent() -> None:
    # The parent holds our stdin open; end of file means it is gone, however it ended (uvicorn
    # re-raises SIGTERM after its shutdown, so the parent's cleanup code may never run).
    sys.stdin.read()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="calcgraph.auth.devidp_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--audience", required=True)
    args = parser.parse_args(argv)
    if not is_loopback(args.host):
        sys.stderr.write(f"refusing to serve the development provider on {args.host}\n")
        return 2
    warnings.simplefilter("ignore", DeprecationWarning)
    # The project's logging (JSON off a terminal): the provider's, Flask's and werkzeug's
    # records, tracebacks included, are one JSON object per line like the API's.
    setup_logging(get_settings())
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = werkzeug.serving.make_server(
        args.host, args.port, build_app(args.audience), threaded=True
    )
    host, port = args.host, server.server_port
    # The parent reads this line to learn the port (the provider may have been given port 0).
    sys.stdout.write(f"http://{host}:{port}\n")
    sys.stdout.flush()
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
