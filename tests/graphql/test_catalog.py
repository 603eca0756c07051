"""The catalog through the GraphQL door: same service, same errors, as extensions.code."""

from __future__ import annotations

from typing import Any

import httpx


async def gql(client: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


CHECK = """query ($s: String!, $t: String!) {
  checkConnection(source: $s, target: $t) { compatibility reason source target }
}"""


class TestCheckConnection:
    async def test_allowed(self, client: httpx.AsyncClient) -> None:
        result = await gql(client, CHECK, s="list[ Force ]", t="list[Numeric]")
        check = result["data"]["checkConnection"]
        assert check["compatibility"] == "ALLOWED"
        assert check["source"] == "list[Force]"
        assert "Force -> Float -> Numeric" in check["reason"]

    async def test_refused(self, client: httpx.AsyncClient) -> None:
        result = await gql(client, CHECK, s="String", t="Integer")
        assert result["data"]["checkConnection"]["compatibility"] == "REFUSED"

    async def test_malformed_expression_carries_the_contract_kind(
        self, client: httpx.AsyncClient
    ) -> None:
        result = await gql(client, CHECK, s="Forc", t="Float")
        error = result["errors"][0]
        assert error["extensions"]["code"] == "ValidationError"
        assert error["message"].startswith("ValidationError: ")
        assert "did you mean 'Force'" in error["message"]


class TestTypes:
    async def test_lists_the_catalog(self, client: httpx.AsyncClient) -> None:
        result = await gql(client, "{ types { name parent unit kind } }")
        names = {t["name"]: t for t in result["data"]["types"]}
        assert names["Pressure"] == {
            "name": "Pressure",
            "parent": "Float",
            "unit": "Pa",
            "kind": "physical",
        }


class TestDocumentErrors:
    async def test_unknown_field_is_a_validation_error(self, client: httpx.AsyncClient) -> None:
        result = await gql(client, "{ nope }")
        assert result["errors"][0]["extensions"]["code"] == "ValidationError"

    async def test_graphiql_for_a_browser(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/graphql", headers={"Accept": "text/html"})
        assert response.status_code == 200
        assert "graphiql" in response.text.lower()
