"""The GraphQL door: hardening limits, masked suggestions, switchable introspection and IDE,
contract error codes, and no N+1 on nested access-controlled fields."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from graphql import get_introspection_query
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.settings import Settings
from tests.access.factories import create_organization, create_package, create_user
from tests.auth.idp import LocalIdentityProvider

Bearer = Callable[..., dict[str, str]]


async def gql(
    client: httpx.AsyncClient, query: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query}, headers=headers or {})
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def strict_client(settings: Settings, database: Database) -> AsyncIterator[httpx.AsyncClient]:
    strict = settings.model_copy(
        update={
            "graphql_max_depth": 4,
            "graphql_max_aliases": 3,
            "graphql_max_tokens": 200,
            "graphql_introspection": False,
            "graphql_ide": False,
        }
    )
    transport = httpx.ASGITransport(app=create_app(strict, database))
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


def codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


class TestLimits:
    async def test_depth_limit(self, strict_client: httpx.AsyncClient, bearer: Bearer) -> None:
        deep = "{ jobs { items { package { functions { package { id } } } } } }"
        body = await gql(strict_client, deep, bearer())
        assert codes(body) == ["ValidationError"]
        assert "depth" in body["errors"][0]["message"]

    async def test_depth_limit_sees_through_fragments(
        self, strict_client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        query = """
            query { jobs { ...J } }
            fragment J on JobPage { items { package { ...P } } }
            fragment P on Package { functions { package { id } } }
        """
        assert codes(await gql(strict_client, query, bearer())) == ["ValidationError"]

    async def test_shallow_query_passes(
        self, strict_client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        body = await gql(strict_client, "{ jobs { items { id } } }", bearer())
        assert body == {"data": {"jobs": {"items": []}}}

    async def test_alias_limit_counts_fragments(
        self, strict_client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        query = """
            query { a: me { id } b: me { id } ...F }
            fragment F on Query { c: me { id } d: me { id } }
        """
        body = await gql(strict_client, query, bearer())
        assert codes(body) == ["ValidationError"]
        assert "aliases" in body["errors"][0]["message"]

    async def test_token_limit(self, strict_client: httpx.AsyncClient, bearer: Bearer) -> None:
        query = "{ me { " + " ".join(["id"] * 300) + " } }"
        body = await gql(strict_client, query, bearer())
        assert codes(body) == ["ValidationError"]
        assert "token" in body["errors"][0]["message"].lower()


class TestDisclosure:
    async def test_no_field_suggestions(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        body = await gql(client, "{ packagez { items { id } } }", bearer())
        message = body["errors"][0]["message"]
        assert "packagez" in message
        assert "Did you mean" not in message
        assert "packages" not in message

    async def test_introspection_can_be_switched_off(
        self, strict_client: httpx.AsyncClient
    ) -> None:
        body = await gql(strict_client, "{ __schema { types { name } } }")
        assert "data" not in body or body["data"] is None
        assert set(codes(body)) == {"ValidationError"}

    async def test_introspection_on_by_default(self, client: httpx.AsyncClient) -> None:
        body = await gql(client, "{ __schema { queryType { name } } }")
        assert body["data"]["__schema"]["queryType"]["name"] == "Query"

    async def test_the_full_introspection_query_fits_the_default_limits(
        self, client: httpx.AsyncClient
    ) -> None:
        body = await gql(client, get_introspection_query(descriptions=True))
        assert "errors" not in body
        assert body["data"]["__schema"]["queryType"]["name"] == "Query"

    async def test_graphiql_can_be_switched_off(self, strict_client: httpx.AsyncClient) -> None:
        response = await strict_client.get("/graphql", headers={"Accept": "text/html"})
        assert "graphiql" not in response.text.lower()

    async def test_permission_denied_keeps_its_message(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        rows = await create_package(database, alice, "secret", "private")
        body = await gql(client, f'{{ package(id: "{rows.package_id}") {{ id }} }}', bearer("bob"))
        error = body["errors"][0]
        assert error["extensions"]["code"] == "PermissionDenied"
        assert error["message"].startswith("PermissionDenied: you may not access package")

    async def test_mutation_errors_carry_the_contract_kind(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        create = 'mutation { createOrganization(slug: "acme", name: "A") { slug } }'
        assert (await gql(client, create, bearer()))["data"] == {
            "createOrganization": {"slug": "acme"}
        }
        assert codes(await gql(client, create, bearer("bob"))) == ["Conflict"]


@pytest.fixture
def statements(engine: AsyncEngine) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
            seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine.sync_engine, "before_cursor_execute", count)


async def test_nested_fields_do_not_grow_the_statement_count(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
    statements: list[str],
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    acme = await create_organization(database, "acme", {alice: "owner"})
    query = "{ packages { items { id functions { id package { id } } organization { slug } } } }"
    counts = []
    for batch in (2, 6):
        for i in range(batch):
            await create_package(database, alice, f"p{batch}-{i}", "internal", acme)
        await gql(client, "{ me { id } }", bearer())  # warm: provisioning, key fetch
        statements.clear()
        body = await gql(client, query, bearer())
        assert "errors" not in body, body
        counts.append(len(statements))
    assert counts[0] == counts[1], counts
    assert counts[1] <= 10, statements


async def test_organization_mutations(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    await create_user(database, identity_provider, "bob")
    created = await gql(
        client, 'mutation { createOrganization(slug: "acme", name: "Acme") { slug } }', bearer()
    )
    assert created == {"data": {"createOrganization": {"slug": "acme"}}}
    added = await gql(
        client,
        'mutation { addMember(slug: "acme", username: "bob", role: owner) { username role } }',
        bearer(),
    )
    assert added == {"data": {"addMember": {"username": "bob", "role": "owner"}}}
    org = await gql(
        client, '{ organization(slug: "acme") { members { username role } } }', bearer("bob")
    )
    assert org["data"]["organization"]["members"] == [
        {"username": "alice", "role": "owner"},
        {"username": "bob", "role": "owner"},
    ]
    removed = await gql(
        client, 'mutation { removeMember(slug: "acme", username: "alice") }', bearer("bob")
    )
    assert removed == {"data": {"removeMember": True}}
    denied = await gql(client, '{ organization(slug: "acme") { slug } }', bearer("alice"))
    assert codes(denied) == ["PermissionDenied"]
