"""The contract's default redirect URI answers a browser that arrives without a token."""

from __future__ import annotations

import httpx


class TestCallbackPage:
    async def test_shows_code_and_state_escaped(self, client: httpx.AsyncClient) -> None:
        response = await client.get(
            "/auth/callback-page", params={"code": "abc<script>", "state": "s1"}
        )
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "abc&lt;script&gt;" in response.text
        # The page has a script of its own (the web app's forward); the code is never markup.
        assert "abc<script>" not in response.text
        assert "POST /auth/callback" in response.text
        assert 'href="/ui/callback?code=abc%3Cscript%3E&amp;state=s1"' in response.text

    async def test_provider_error_is_shown(self, client: httpx.AsyncClient) -> None:
        response = await client.get(
            "/auth/callback-page",
            params={"error": "access_denied", "error_description": "user said no"},
        )
        assert response.status_code == 400
        assert "access_denied: user said no" in response.text

    async def test_without_code_says_to_start_again(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/auth/callback-page")
        assert response.status_code == 400
        assert "start again" in response.text
