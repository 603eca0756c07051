"""The demo's in-process platform signs its users in while its server starts."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from calcgraph.demo.platform import InProcessPlatform
from calcgraph.settings import Settings
from tests.execution.conftest import quick_sandbox


def test_users_named_at_start_have_a_token_that_the_api_takes(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}",
        sandbox=quick_sandbox(),
        oidc_issuer=None,
        redis_url=None,
    )
    with InProcessPlatform(settings, users=("alice",)) as platform:
        token = platform.token("alice")
        assert platform.token("alice") == token  # kept, not signed in again
        me = httpx.get(
            f"{platform.base_url}/auth/me",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        bob = platform.token("bob")  # a user not named at start: signed in on demand
        assert bob != token
    assert me.status_code == 200, me.text
    assert me.json()["username"] == "alice"
    # The provider's records of each sign-in stay out of the demo user's terminal.
    assert "issued authorization code" not in capfd.readouterr().err


def test_the_platform_answers_without_nagles_delay(tmp_path: Path) -> None:
    """Its connections have TCP_NODELAY, as `calcgraph serve`'s have: uvicorn writes an answer's
    head and body apart, and with Nagle on the second write waited for the client's delayed
    ACK (40 ms a request on Linux, every request after a connection's first)."""
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}",
        sandbox=quick_sandbox(),
        oidc_issuer=None,
        redis_url=None,
    )
    with InProcessPlatform(settings) as platform, httpx.Client(timeout=30) as client:
        assert client.get(f"{platform.base_url}/health").status_code == 200
        server = platform._server
        assert server is not None
        sockets = [
            connection.transport.get_extra_info("socket")
            for connection in server.server_state.connections
        ]
        assert sockets
        assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
