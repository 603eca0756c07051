"""The development identity provider in a browser's flow (issue 13, contract section 3): the
sign-in page renders (it answered 500, TemplateNotFound), a person picks alice, and the
authorization code with PKCE S256 goes through `/auth/login`, the provider's form and
`/auth/callback` to a token the API accepts. The provider logs through the JSON logger."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from calcgraph.app import create_app
from calcgraph.auth.devidp import DevIdentityProvider
from calcgraph.db.engine import Database
from calcgraph.settings import Settings

pytestmark = pytest.mark.db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def provider() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider("calcgraph-api", port=free_port()) as running:
        yield running


@pytest.fixture
async def api(
    provider: DevIdentityProvider, database_url: str, database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=database_url,
        dev_idp_port=int(provider.issuer.rsplit(":", 1)[1]),
    )
    assert settings.uses_dev_identity_provider
    transport = httpx.ASGITransport(app=create_app(settings, database))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
        yield c


class Forms(HTMLParser):
    """The forms of a page: action, and the submit buttons' name/value pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, object]] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append({"action": found.get("action") or "", "buttons": []})
        elif tag == "button" and self.forms and found.get("name"):
            buttons = self.forms[-1]["buttons"]
            assert isinstance(buttons, list)
            buttons.append((found["name"], found.get("value")))
        for name in ("href", "src"):
            if (found.get(name) or "").startswith(("http://", "https://", "//")):
                self.external.append(found[name] or "")


async def test_alice_signs_in_through_the_form(
    api: httpx.AsyncClient, provider: DevIdentityProvider
) -> None:
    start = await api.post("/auth/login")
    assert start.status_code == 200, start.text
    login = start.json()
    async with httpx.AsyncClient(timeout=10) as browser:
        page = await browser.get(login["authorization_url"])
        assert page.status_code == 200, page.text[:500]
        assert page.headers["content-type"].startswith("text/html")
        forms = Forms()
        forms.feed(page.text)
        assert forms.external == [], "the page loads nothing from other hosts"
        users = [
            value
            for form in forms.forms
            for name, value in form["buttons"]  # type: ignore[attr-defined]
            if name == "sub"
        ]
        assert {"alice", "bob", "admin"} <= set(users)
        # The button a person clicks: the form posts back to the page's own URL.
        submitted = await browser.post(
            urljoin(login["authorization_url"], ""),
            data={"sub": "alice"},
            follow_redirects=False,
        )
        assert submitted.status_code == 302, submitted.text[:500]
        location = submitted.headers["location"]
    assert location.startswith(login["redirect_uri"])
    query = parse_qs(urlsplit(location).query)
    assert query["state"] == [login["state"]]
    # The browser lands on the API's redirect page, which shows the code.
    landing = await api.get(urlsplit(location).path + "?" + urlsplit(location).query)
    assert landing.status_code == 200
    assert query["code"][0] in landing.text
    done = await api.post(
        "/auth/callback",
        json={"code": query["code"][0], "code_verifier": login["code_verifier"]},
    )
    assert done.status_code == 200, done.text
    assert done.json()["user"]["username"] == "alice"
    me = await api.get(
        "/auth/me", headers={"Authorization": f"Bearer {done.json()['access_token']}"}
    )
    assert me.json()["username"] == "alice"


def test_the_provider_logs_json() -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    environment |= {"CALCGRAPH_LOG_FORMAT": "json", "CALCGRAPH_LOG_LEVEL": "info"}
    process = subprocess.Popen(
        [sys.executable, "-m", "calcgraph.auth.devidp_server", "--audience", "calcgraph-api"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        text=True,
    )
    try:
        assert process.stdout is not None
        issuer = process.stdout.readline().strip()
        params = {
            "response_type": "code",
            "client_id": "calcgraph-dev",
            "redirect_uri": "http://127.0.0.1/cb",
            "scope": "openid",
            "state": "s",
        }
        with httpx.Client(base_url=issuer, timeout=10) as http:
            assert http.get("/oauth2/authorize", params=params).status_code == 200
            http.post("/oauth2/authorize", params=params, data={"sub": "alice"})
            http.get("/oauth2/authorize", params={"client_id": "x"})  # a refused request
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the provider exits when its parent's pipe closes
        process.wait(timeout=10)
    assert process.stderr is not None
    logged = process.stderr.read()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    lines = [line for line in logged.splitlines() if line.strip()]
    assert lines, "the provider logged its sign-in"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"level", "logger", "message", "timestamp"} <= r.keys() for r in records)
    assert any(r["logger"].startswith("oidc_provider_mock") for r in records), records
    assert not any(re.search(r"TemplateNotFound", json.dumps(r)) for r in records)
