"""Issue 27, point 6: the small items of contract section 8b."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.packages.publishing import publish, small_body

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
        assert "unsafe-inline" not in policy

    async def test_graphiql_styles_without_unsafe_inline_a_nonce_per_answer(
        self, client: httpx.AsyncClient
    ) -> None:
        """GraphiQL's runtime <style> elements are allowed by a nonce that the page carries
        (`<meta name="csp-nonce">`), a new one per answer; no inline style is allowed."""
        nonces = []
        for _ in range(2):
            response = await client.get("/graphql", headers={"Accept": "text/html"})
            if response.status_code == 503:
                pytest.skip("the web app is not built here")
            policy = response.headers["Content-Security-Policy"]
            styles = policy.split("style-src")[1].split(";")[0].split()
            assert "'unsafe-inline'" not in styles
            [nonce] = [s.removeprefix("'nonce-").rstrip("'") for s in styles if "nonce-" in s]
            assert f'<meta name="csp-nonce" content="{nonce}" />' in response.text
            assert "no-store" in response.headers["Cache-Control"]
            nonces.append(nonce)
        assert nonces[0] != nonces[1]
        assert len(nonces[0]) >= 22

    async def test_the_apps_files_are_not_sniffed(self, client: httpx.AsyncClient) -> None:
        page = (await client.get("/ui/")).text
        assets = [part.split('"')[0] for part in page.split('src="/ui/assets/')[1:]]
        if not assets:
            pytest.skip("the web app is not built here")
        response = await client.get(f"/ui/assets/{assets[0]}")
        assert response.status_code == 200
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"


def _name(prefix: str = "pub") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class TestPublishedPathsThatCannotBeStaged:
    @pytest.mark.parametrize(
        "files",
        [
            {"a" * 300 + ".py": "x = 1\n"},
            {"deep/" + "\u00e9" * 128 + "/x.py": "x = 1\n"},  # 256 bytes of UTF-8
            {"m.py": "x = 1\n", "m.py/x.py": "y = 2\n"},
            {"pkg": "", "pkg/mod.py": "y = 2\n"},
        ],
    )
    async def test_refused_at_publish_with_422(
        self, client: httpx.AsyncClient, bearer: Any, files: dict[str, str]
    ) -> None:
        body = small_body(_name(), "1.0.0")
        body["files"].update(files)
        response = await client.post("/packages", json=body, headers=bearer("alice"))
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith("ValidationError: package files are invalid")
        assert "/tmp" not in response.text
        assert "/var" not in response.text

    async def test_a_255_byte_component_is_fine(
        self, client: httpx.AsyncClient, bearer: Any
    ) -> None:
        body = small_body(_name(), "1.0.0")
        body["files"]["d/" + "a" * 252 + ".py"] = "x = 1\n"
        await publish(client, bearer("alice"), body)


class TestNamesAreUniqueWithoutRegardToCase:
    async def test_a_package_name_in_another_case_is_a_conflict(
        self, client: httpx.AsyncClient, bearer: Any
    ) -> None:
        name = _name("PUB")
        await publish(client, bearer("alice"), small_body(name, "1.0.0"))
        for other in (name.lower(), name.swapcase()):
            response = await client.post(
                "/packages", json=small_body(other, "1.0.0"), headers=bearer("bob")
            )
            assert response.status_code == 409, response.text
            assert response.json()["detail"].startswith("Conflict: ")
            assert "without regard to case" in response.json()["detail"]
        # The owner's next version under the same exact name still publishes.
        await publish(
            client,
            bearer("alice"),
            small_body(name, "1.0.1", code="def run(x):\n    return {'y': x + 1}\n"),
        )

    async def test_function_names_in_another_case_are_a_conflict(
        self, client: httpx.AsyncClient, bearer: Any
    ) -> None:
        io = {"inputs": {"x": {"type": "Float"}}, "outputs": {"y": {"type": "Float"}}}
        both = {"inc": {"handler": "main:run", **io}, "Inc": {"handler": "main:run", **io}}
        response = await client.post(
            "/packages",
            json=small_body(_name(), "1.0.0", functions=both),
            headers=bearer("alice"),
        )
        assert response.status_code == 409, response.text
        assert "differ only in case" in response.json()["detail"]
        name = _name()
        await publish(
            client,
            bearer("alice"),
            small_body(name, "1.0.0", functions={"inc": {"handler": "main:run", **io}}),
        )
        later = small_body(name, "1.1.0", functions={"INC": {"handler": "main:run", **io}})
        response = await client.post("/packages", json=later, headers=bearer("alice"))
        assert response.status_code == 409, response.text

    async def test_organization_slugs(self, client: httpx.AsyncClient, bearer: Any) -> None:
        slug = _name("org")
        created = await client.post(
            "/organizations", json={"slug": slug, "name": slug}, headers=bearer("alice")
        )
        assert created.status_code == 201, created.text
        again = await client.post(
            "/organizations", json={"slug": slug, "name": "x"}, headers=bearer("bob")
        )
        assert again.status_code == 409, again.text
        # Another case of it is never a second organization: slugs are lowercase.
        upper = await client.post(
            "/organizations", json={"slug": slug.upper(), "name": "x"}, headers=bearer("bob")
        )
        assert upper.status_code in (409, 422), upper.text
