"""The development identity provider: a real OpenID provider on loopback (the maintained
`oidc-provider-mock` package, run by `devidp_server` in a child process) with the users alice,
bob and admin, and the browserless sign-in that `calcgraph token` uses."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from calcgraph.auth.issuer import is_loopback

DEV_CLIENT_ID = "calcgraph-dev"
DEV_REDIRECT_URI = "http://127.0.0.1/calcgraph-cli"
TOKEN_LIFETIME = timedelta(hours=1)


@dataclass(frozen=True)
class DevUser:
    username: str
    given_name: str
    family_name: str
    roles: tuple[str, ...]

    def claims(self) -> dict[str, Any]:
        return {
            "preferred_username": self.username,
            "email": f"{self.username}@calcgraph.dev",
            "given_name": self.given_name,
            "family_name": self.family_name,
            "realm_access": {"roles": list(self.roles)},
        }


DEV_USERS = {
    "alice": DevUser("alice", "Alice", "Archer", ("user",)),
    "bob": DevUser("bob", "Bob", "Builder", ("user",)),
    "admin": DevUser("admin", "Ada", "Admin", ("admin", "user")),
}


# How long `calcgraph token` waits for a provider that does not answer yet.
PROVIDER_START_SECONDS = 10.0


PROOF_PATH = "/calcgraph/proof"
"""Where a provider started by calcgraph proves it is one (see `verify_own`)."""


def proof_of(secret: bytes, challenge: str) -> str:
    return hmac.new(secret, challenge.encode(), hashlib.sha256).hexdigest()


def proof_file(port: int) -> Path:
    """The secret of the provider calcgraph runs on `port`, readable by this user alone."""
    return Path.home() / ".cache" / "calcgraph" / f"devidp-{port}.proof"


class DevIdentityProvider:
    """The provider as a child process on loopback; `issuer` is known once it listens."""

    def __init__(
        self,
        audience: str,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str | None = None,
        proof: Path | None = None,
    ) -> None:
        """`log_level`: the child's, where it differs from the settings' (the demo keeps the
        provider's per-sign-in records out of its user's terminal)."""
        if not is_loopback(host):
            raise ValueError(
                f"the development identity provider only listens on loopback, not {host}"
            )
        self.audience = audience
        self.host = host
        self.port = port
        self.log_level = log_level
        self.proof = proof
        self._process: subprocess.Popen[str] | None = None
        self.issuer = ""

    def start(self, timeout: float = 20.0) -> DevIdentityProvider:
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the child process without waiting for it to listen."""
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "calcgraph.auth.devidp_server",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--audience",
                self.audience,
                *(() if self.log_level is None else ("--log-level", self.log_level)),
                *(() if self.proof is None else ("--proof-file", str(self.proof))),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self, timeout: float = 20.0) -> None:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError("the development identity provider did not start")
        self.issuer = line
        deadline = time.monotonic() + timeout
        while True:
            try:
                _get_discovery(self.issuer, timeout=2)
                return
            except _UNANSWERED as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the development identity provider does not answer") from exc
                time.sleep(0.02)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._process = None

    def __enter__(self) -> DevIdentityProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sign_in(issuer: str, username: str, client_id: str = DEV_CLIENT_ID) -> dict[str, Any]:
    """The authorization code flow without a browser: submit the provider's sign-in form as
    `username`, follow the redirect's code to the token endpoint. Returns the token response."""
    import httpx

    with httpx.Client(base_url=issuer, timeout=10) as http:
        state = secrets.token_urlsafe(12)
        authorize = http.post(
            "/oauth2/authorize",
            params={
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": DEV_REDIRECT_URI,
                "scope": "openid profile email",
                "state": state,
            },
            data={"sub": username},
        )
        location = authorize.headers.get("location", "")
        query = parse_qs(urlsplit(location).query)
        if authorize.status_code != 302 or query.get("state") != [state] or "code" not in query:
            raise RuntimeError(
                f"the identity provider did not issue a code ({authorize.status_code})"
            )
        token = http.post(
            "/oauth2/token",
            data={
                "grant_type": "authorization_code",
                "code": query["code"][0],
                "redirect_uri": DEV_REDIRECT_URI,
                "client_id": client_id,
                # The provider accepts any secret for an unregistered client; it wants one.
                "client_secret": "development",
            },
        )
        token.raise_for_status()
        body: dict[str, Any] = token.json()
        return body


def start_for_serve(audience: str, host: str, port: int) -> DevIdentityProvider | None:
    """The provider `serve` runs when no issuer is configured; refused off loopback, where
    anyone could sign in as anyone (the provider asks for no password)."""
    if not is_loopback(host):
        raise ValueError(
            f"no CALCGRAPH_OIDC_ISSUER is set, so serve runs the development identity provider, "
            f"which is for loopback only; refusing to serve on {host}. Set "
            "CALCGRAPH_OIDC_ISSUER (and the client settings) to serve beyond this machine."
        )
    issuer = f"http://127.0.0.1:{port}"
    if _answers(issuer):
        # Another `serve` of this user already runs it: share it, tokens verify either way.
        # Anything else answering there could sign tokens for anyone, admins included: the
        # API would trust its keys. It must prove it is ours, or serve refuses to start.
        if verify_own(issuer, proof_file(port)):
            return None
        raise ValueError(
            f"something answers at {issuer} as an OpenID provider, but it is not the "
            "development identity provider calcgraph started for this user (it cannot prove "
            f"it with {proof_file(port)}); refusing to trust its tokens. Stop it, or set "
            "CALCGRAPH_DEV_IDP_PORT to a free port."
        )
    provider = DevIdentityProvider(audience, port=port, proof=proof_file(port))
    provider.launch()
    # The API starts meanwhile (its /health needs no provider; a token comes from the provider,
    # so no caller can present one before it listens). A provider that fails is logged.
    threading.Thread(target=_report_failure, args=(provider,), daemon=True).start()
    return provider


def verify_own(issuer: str, proof: Path) -> bool:
    """Whether the provider at `issuer` knows the secret in `proof` (a file of this user's,
    which a provider calcgraph started wrote), asked with a fresh challenge."""
    try:
        if proof.stat().st_uid != os.getuid() or proof.stat().st_mode & 0o077:
            return False
        secret = bytes.fromhex(proof.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return False
    challenge = secrets.token_hex(16)
    parts = urlsplit(issuer)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=2)
    try:
        connection.request("GET", f"{PROOF_PATH}?challenge={challenge}")
        response = connection.getresponse()
        answer = json.loads(response.read()).get("proof") if response.status == 200 else None
    except (*_UNANSWERED, ValueError, AttributeError):
        return False
    finally:
        connection.close()
    return isinstance(answer, str) and hmac.compare_digest(answer, proof_of(secret, challenge))


def _report_failure(provider: DevIdentityProvider) -> None:
    try:
        provider.wait_ready()
    except RuntimeError as exc:
        logging.getLogger("calcgraph").error("%s: sign-in and tokens will fail", exc)


# The standard library's client for these two probes, which `serve` makes while it starts:
# importing httpx loads its command line's rich, pygments and click, a fifth of a second.
_UNANSWERED = (OSError, http.client.HTTPException)


def _get_discovery(issuer: str, timeout: float) -> tuple[int, bytes]:
    """The status and body of the provider's discovery document; raises `_UNANSWERED`."""
    parts = urlsplit(issuer)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        connection.request("GET", f"{parts.path.rstrip('/')}/.well-known/openid-configuration")
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _answers(issuer: str) -> bool:
    try:
        status, body = _get_discovery(issuer, timeout=1)
        return status == 200 and json.loads(body).get("issuer") == issuer
    except (*_UNANSWERED, ValueError, AttributeError):
        return False


def dev_token(issuer: str, username: str) -> str:
    """An access token for one of the development users, from the running provider."""
    if username not in DEV_USERS:
        raise ValueError(f"unknown development user {username!r}; one of {', '.join(DEV_USERS)}")
    import httpx

    # `serve` answers /health while it starts and launches the provider beside it, so a token
    # asked for right after may find the provider still starting: give it a few seconds.
    deadline = time.monotonic() + PROVIDER_START_SECONDS
    while True:
        try:
            tokens = sign_in(issuer, username)
            break
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise ValueError(
                    f"the development identity provider does not answer at {issuer} "
                    f"(waited {PROVIDER_START_SECONDS:.0f} s); start `calcgraph serve` first"
                ) from None
            time.sleep(0.1)
    token = tokens.get("access_token")
    if not isinstance(token, str):
        raise ValueError("the development identity provider issued no access token")
    return token
