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

from calcgraph.auth.devidp import DEV_USERS, PROOF_PATH, TOKEN_LIFETIME, proof_of
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
        challenge = flask.request.values.get("code_challenge")
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
        # Every code that has a challenge, wherever the request puts its parameters: authlib
        # reads them from the query string as well as the form, so a check of the form alone
        # (or of its `grant_type`) lets a request with them in the query through.
        values = flask.request.values
        with self._lock:
            entries = [self._by_code.get(code) for code in values.getlist("code")]
        found = [entry for entry in entries if entry is not None]
        if not found:
            return None
        verifiers = values.getlist("code_verifier")
        verifier = verifiers[0] if len(verifiers) == 1 else ""
        entry = found[0]
        if len(found) > 1 or len(values.getlist("code")) > 1:
            return flask.jsonify(error="invalid_request", error_description="one code"), 400
        digest = hashlib.sha256(verifier.encode()).digest()
        expected = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        if not hmac.compare_digest(expected, entry[0]):
            return flask.jsonify(
                error="invalid_grant",
                error_description="code_verifier does not match the code_challenge",
            ), 400
        with self._lock:
            self._by_code.pop(values["code"], None)
        return None


def build_app(
    audience: str, lifetime: timedelta = TOKEN_LIFETIME, proof_secret: bytes | None = None
) -> flask.Flask:
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

    @app.get(PROOF_PATH)
    def proof() -> flask.typing.ResponseReturnValue:
        # Whoever can read the proof file (its owner) can tell this provider from another
        # server on the port: the HMAC of their challenge under the file's secret.
        challenge = flask.request.args.get("challenge", "")
        if proof_secret is None or not challenge:
            return flask.jsonify(error="not_found"), 404
        return flask.jsonify(proof=proof_of(proof_secret, challenge))

    @app.before_request
    def refuse_user_edits() -> flask.typing.ResponseReturnValue | None:
        # The provider's own `PUT /users/<sub>` would let any local caller give any user any
        # claim, the admin role included: the development users are fixed (DEV_USERS).
        if flask.request.path.startswith("/users/") and flask.request.method != "GET":
            return flask.jsonify(
                error="forbidden", error_description="the development users cannot be edited"
            ), 403
        return None

    return app


def write_proof_file(path: Path) -> bytes:
    """A fresh secret in `path`, readable by this user alone (replacing an older one)."""
    secret = secrets.token_bytes(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(secret.hex().encode())
    os.replace(temporary, path)
    return secret


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
    parser.add_argument("--proof-file", help="write a secret here (0600) to prove who we are")
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
    secret = write_proof_file(Path(args.proof_file)) if args.proof_file else None
    server = werkzeug.serving.make_server(
        args.host, args.port, build_app(args.audience, proof_secret=secret), threaded=True
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
