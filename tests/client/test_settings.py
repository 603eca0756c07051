"""Where the client finds its server and token: arguments, environment, credentials file."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from calcgraph.client import Client
from calcgraph.client.credentials import Credentials
from calcgraph.client.settings import DEFAULT_URL, ClientSettings, resolve


def test_defaults_without_anything() -> None:
    connection = resolve()
    assert (connection.url, connection.token) == (DEFAULT_URL, None)


def test_order_arguments_environment_file(
    monkeypatch: pytest.MonkeyPatch, isolated_client_config: Path
) -> None:
    Credentials(isolated_client_config).store("http://stored:1/", "stored-token")
    assert resolve() == resolve(settings=ClientSettings())
    assert (resolve().url, resolve().token) == ("http://stored:1", "stored-token")
    # Another server: the stored token is not sent there.
    assert resolve("http://other:2").token is None
    monkeypatch.setenv("CALCGRAPH_URL", "http://env:3/")
    monkeypatch.setenv("CALCGRAPH_TOKEN", "env-token")
    assert (resolve().url, resolve().token) == ("http://env:3", "env-token")
    assert (resolve("http://arg:4", "arg-token").url, resolve(None, "arg-token").token) == (
        "http://arg:4",
        "arg-token",
    )
    with Client() as client:
        assert (client.url, client.token) == ("http://env:3", "env-token")


def test_file_is_private_and_keeps_other_servers(isolated_client_config: Path) -> None:
    credentials = Credentials(isolated_client_config)
    credentials.store("http://a:1", "token-a", username="alice")
    credentials.store("http://b:2", "token-b", expires_at=int(time.time()) + 60)
    assert stat.S_IMODE(isolated_client_config.stat().st_mode) == 0o600
    assert stat.S_IMODE(isolated_client_config.parent.stat().st_mode) == 0o700
    data = json.loads(isolated_client_config.read_text())
    assert data["default_url"] == "http://b:2"
    assert set(data["servers"]) == {
        "http://a:1",
        "http://b:2",
    }
    assert credentials.token_for("http://a:1") == "token-a"
    assert credentials.forget("http://a:1")
    assert not credentials.forget("http://a:1")
    assert credentials.token_for("http://a:1") is None
    assert credentials.token_for("http://b:2") == "token-b"


def test_expired_or_unreadable_tokens_are_not_used(isolated_client_config: Path) -> None:
    credentials = Credentials(isolated_client_config)
    credentials.store("http://a:1", "old", expires_at=int(time.time()) - 1)
    assert credentials.token_for("http://a:1") is None
    isolated_client_config.write_text("not json")
    assert credentials.load() == {}
    assert resolve().url == DEFAULT_URL
