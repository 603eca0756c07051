"""`calcgraph login --username` against the real development identity provider (the one
`calcgraph serve` runs without CALCGRAPH_OIDC_ISSUER), through the server's own sign-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from calcgraph.auth.devidp import DevIdentityProvider
from calcgraph.cli import main
from calcgraph.client import Client
from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, exec_url, free_port, serve  # noqa: F401


@pytest.fixture(scope="module")
def dev_served(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    port = free_port()
    with DevIdentityProvider("calcgraph-api", port=port):
        tmp = tmp_path_factory.mktemp("dev")
        # No issuer and no client: the settings `calcgraph serve` has on a fresh machine.
        overrides = {"oidc_issuer": None, "oidc_client_id": None, "dev_idp_port": port}
        with serve(exec_url, identity_provider, tmp, **overrides) as running:
            yield running


def test_login_as_a_development_user(
    dev_served: Served, capsys: pytest.CaptureFixture[str], isolated_client_config: Path
) -> None:
    assert main(["--url", dev_served.url, "login", "--username", "bob", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["username"] == "bob"
    assert document["expires_in"]
    entry = json.loads(isolated_client_config.read_text())["servers"][dev_served.url]
    assert entry["username"] == "bob"
    assert entry["expires_at"] > 0
    assert main(["--json", "functions", "list"]) == 0
    assert "items" in json.loads(capsys.readouterr().out)
    # The stored token is the provider's, and the server takes it as bob's.
    with Client() as client:
        assert client.url == dev_served.url
        assert client.me().username == "bob"


def test_a_stale_stored_token_does_not_block_signing_in_again(
    dev_served: Served, capsys: pytest.CaptureFixture[str], isolated_client_config: Path
) -> None:
    from calcgraph.client.credentials import Credentials

    Credentials(isolated_client_config).store(dev_served.url, "expired-or-revoked")
    assert main(["--url", dev_served.url, "functions", "list"]) == 3
    assert main(["--url", dev_served.url, "login", "--username", "alice"]) == 0
    assert "as alice" in capsys.readouterr().out
    assert main(["functions", "list"]) == 0
