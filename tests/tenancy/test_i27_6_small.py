"""Issue 27, point 6: the small items of contract section 8b."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.db


class TestGraphQLVariablesOfTheWrongTypeAreValidationErrors:
    @pytest.mark.parametrize(
        ("query", "variables"),
        [
            ("query($id: ID!) { job(id: $id) { id } }", {"id": {"a": 1}}),
            ("query($id: ID!) { job(id: $id) { id } }", {"id": [1, 2]}),
            ("query($id: ID!) { job(id: $id) { id } }", {}),
            ("query($id: ID!) { job(id: $id) { id } }", {"id": None}),
            ("query($n: Int) { jobs(limit: $n) { __typename } }", {"n": "many"}),
            ("query($n: Int) { jobs(limit: $n) { __typename } }", {"n": 2**70}),
            ("query($n: Int) { jobs(limit: $n) { __typename } }", {"n": 1.5}),
        ],
    )
    async def test_refused_before_execution(
        self, client: httpx.AsyncClient, bearer: Any, query: str, variables: dict[str, Any]
    ) -> None:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=bearer()
        )
        body = response.json()
        if response.status_code == 422:  # refused by the body's JSON rules, before GraphQL
            assert body["detail"].startswith("ValidationError: "), body
            return
        assert body.get("errors"), body
        codes = {e["extensions"]["code"] for e in body["errors"]}
        assert codes == {"ValidationError"}, body

    async def test_variables_that_are_not_an_object(
        self, client: httpx.AsyncClient, bearer: Any
    ) -> None:
        response = await client.post(
            "/graphql",
            json={"query": "query($id: ID!) { job(id: $id) { id } }", "variables": [1]},
            headers=bearer(),
        )
        assert response.status_code == 400, response.text
        assert "must be an object" in response.text


class TestBrowserHardeningHeaders:
    def _assert_hardened(self, response: httpx.Response) -> str:
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        policy = response.headers["Content-Security-Policy"]
        directives = dict(
            (part.split()[0], part.split()[1:]) for part in policy.split(";") if part.strip()
        )
        assert directives["script-src"] == ["'self'"], policy
        assert directives["frame-ancestors"] == ["'none'"], policy
        assert directives["object-src"] == ["'none'"], policy
        assert directives["style-src"][0] == "'self'", policy
        assert not any("http" in source for source in directives["style-src"]), policy
        return policy

    @pytest.mark.parametrize("path", ["/ui/", "/ui/runs/some/deep/link"])
    async def test_the_web_app(self, client: httpx.AsyncClient, path: str) -> None:
        response = await client.get(path)
        assert response.status_code in (200, 503), response.text
        policy = self._assert_hardened(response)
        assert "unsafe-inline" not in policy  # the app's styles are its stylesheets alone

    async def test_graphiql(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/graphql", headers={"Accept": "text/html"})
        assert response.status_code in (200, 503), response.text
        policy = self._assert_hardened(response)
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]

    async def test_the_apps_files_are_not_sniffed(self, client: httpx.AsyncClient) -> None:
        page = (await client.get("/ui/")).text
        assets = [part.split('"')[0] for part in page.split('src="/ui/assets/')[1:]]
        if not assets:
            pytest.skip("the web app is not built here")
        response = await client.get(f"/ui/assets/{assets[0]}")
        assert response.status_code == 200
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"
