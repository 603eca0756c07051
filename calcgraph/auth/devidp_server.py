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
import base64
import hashlib
import hmac
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
from urllib.parse import parse_qs, urlsplit

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
        # The key object itself, not its PEM: PyJWT would load a PEM again, and loading an RSA
        # key checks it (0.18 s of CPU, the most of a sign-in), for a key this process made.
        private_key = storage.jwk.get_private_key()
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
        return jwt.encode(claims, private_key, algorithm="RS256", headers={"kid": public["kid"]})

    return generate


TEMPLATES = Path(__file__).with_name("devidp_templates")

# How long a code's PKCE challenge is kept for its redemption (the provider's codes are
# redeemed within seconds; a code never redeemed must not hold memory for ever).
CHALLENGE_LIFETIME_SECONDS = 600.0


class PkceChallenges:
    """RFC 7636 (S256) for the provider, which stores no code challenge and so would take any
    verifier, or none. A code issued for an authorization request that sent a challenge is
    redeemed only with the verifier whose SHA-256 it is; a code issued without one (the
    `calcgraph token` flow) is redeemed as before. A wrong verifier leaves the challenge in
    place: the legitimate client can still redeem its code, the guesser cannot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_code: dict[str, tuple[str, float]] = {}

    def remember(self, response: flask.Response) -> flask.Response:
        challenge = flask.request.args.get("code_challenge")
        if flask.request.method != "POST" or challenge is None or response.status_code != 302:
            return response
        codes = parse_qs(urlsplit(response.headers.get("Location", "")).query).get("code", [])
        now = time.monotonic()
        with self._lock:
            for code, (_, at) in list(self._by_code.items()):
                if now - at > CHALLENGE_LIFETIME_SECONDS:
                    del self._by_code[code]
            for code in codes:
                self._by_code[code] = (challenge, now)
        return response

    def check(self) -> flask.typing.ResponseReturnValue | None:
        form = flask.request.form
        if form.get("grant_type") != "authorization_code":
            return None
        code = form.get("code", "")
        with self._lock:
            entry = self._by_code.get(code)
        if entry is None:
            return None
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        expected = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        if not hmac.compare_digest(expected, entry[0]):
            return flask.jsonify(
                error="invalid_grant",
                error_description="code_verifier does not match the code_challenge",
            ), 400
        with self._lock:
            self._by_code.pop(code, None)
        return None


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
    pkce = PkceChallenges()

    @app.after_request
    def remember_challenge(response: flask.Response) -> flask.Response:
        return pkce.remember(response) if flask.request.path == "/oauth2/authorize" else response

    @app.before_request
    def check_verifier() -> flask.typing.ResponseReturnValue | None:
        return pkce.check() if flask.request.path == "/oauth2/token" else None

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
    parser.add_argument("--log-level", help="instead of the settings' (CALCGRAPH_LOG_LEVEL)")
    args = parser.parse_args(argv)
    if not is_loopback(args.host):
        sys.stderr.write(f"refusing to serve the development provider on {args.host}\n")
        return 2
    warnings.simplefilter("ignore", DeprecationWarning)
    # The project's logging (JSON off a terminal): the provider's, Flask's and werkzeug's
    # records, tracebacks included, are one JSON object per line like the API's.
    settings = get_settings()
    if args.log_level is not None:
        settings = settings.model_copy(update={"log_level": args.log_level})
    setup_logging(settings)
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
