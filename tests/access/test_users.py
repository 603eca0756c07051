"""Users are provisioned from their token on first request and follow later claim changes."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from calcgraph.db.engine import Database
from calcgraph.domain.access.models import User
from tests.auth.idp import LocalIdentityProvider


async def test_first_request_provisions_the_user(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    response = await client.get("/auth/me", headers=identity_provider.headers("alice"))
    assert response.status_code == 200
    me = response.json()
    assert me["username"] == "alice"
    assert me["sub"] == "sub-alice"
    assert me["email"] == "alice@example.test"
    assert me["given_name"] == "Alice"
    assert me["family_name"] == "Tester"
    assert me["roles"] == ["user"]


async def test_claims_changes_update_the_user(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider, database: Database
) -> None:
    await client.get("/auth/me", headers=identity_provider.headers("alice"))
    claims = identity_provider.claims("alice", roles=["admin", "user"])
    claims["email"] = "alice@new.example"
    claims["preferred_username"] = "alice2"
    token = identity_provider.sign(claims)
    me = (await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})).json()
    assert me["username"] == "alice2"
    assert me["email"] == "alice@new.example"
    assert me["roles"] == ["admin", "user"]
    async with database.read_session() as session:
        count = await session.scalar(
            select(func.count()).select_from(User).where(User.subject == "sub-alice")
        )
    assert count == 1


async def test_no_roles_claim_defaults_to_user(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    claims = identity_provider.claims("dora")
    del claims["realm_access"]
    token = identity_provider.sign(claims)
    me = (await client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})).json()
    assert me["roles"] == ["user"]


async def test_graphql_me(
    client: httpx.AsyncClient, identity_provider: LocalIdentityProvider
) -> None:
    response = await client.post(
        "/graphql",
        json={"query": "{ me { username roles email } }"},
        headers=identity_provider.headers("bob"),
    )
    assert response.json() == {
        "data": {"me": {"username": "bob", "roles": ["user"], "email": "bob@example.test"}}
    }


async def test_graphql_me_without_token(client: httpx.AsyncClient) -> None:
    response = await client.post("/graphql", json={"query": "{ me { username } }"})
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "Unauthenticated"
    assert error["message"].startswith("Unauthenticated: ")


async def test_graphql_with_an_invalid_token_is_401(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/graphql", json={"query": "{ types { name } }"}, headers={"Authorization": "Bearer x"}
    )
    assert response.status_code == 401


async def test_public_graphql_fields_need_no_token(client: httpx.AsyncClient) -> None:
    response = await client.post("/graphql", json={"query": "{ types { name } }"})
    assert response.status_code == 200
    assert response.json()["data"]["types"]
