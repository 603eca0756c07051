"""The demo's in-process platform signs its users in while its server starts."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from calcgraph.demo.platform import InProcessPlatform
from calcgraph.settings import Settings


def test_users_named_at_start_have_a_token_that_the_api_takes(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}",
        sandbox="process",
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
