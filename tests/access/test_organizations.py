"""Organizations and membership over HTTP: create, read, add and remove members."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from calcgraph.db.engine import Database
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider

Bearer = Callable[..., dict[str, str]]


class TestCreate:
    async def test_creator_becomes_owner(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        response = await client.post(
            "/organizations", json={"slug": "acme", "name": "Acme"}, headers=bearer("alice")
        )
        assert response.status_code == 201
        body = response.json()
        assert body["slug"] == "acme"
        assert body["members"] == [{"username": "alice", "role": "owner"}]

    async def test_duplicate_slug_is_409(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        body = {"slug": "acme", "name": "Acme"}
        await client.post("/organizations", json=body, headers=bearer("alice"))
        response = await client.post("/organizations", json=body, headers=bearer("bob"))
        assert response.status_code == 409
        assert response.json()["detail"].startswith("Conflict: ")

    async def test_invalid_slug_is_422(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        response = await client.post(
            "/organizations", json={"slug": "Not A Slug", "name": "x"}, headers=bearer("alice")
        )
        assert response.status_code == 422

    async def test_needs_a_token(self, client: httpx.AsyncClient) -> None:
        response = await client.post("/organizations", json={"slug": "acme", "name": "Acme"})
        assert response.status_code == 401


class TestMembers:
    async def test_owner_adds_and_removes_a_member(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        await create_user(database, identity_provider, "bob")
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        assert (await client.get("/organizations/acme", headers=bearer("bob"))).status_code == 403

        added = await client.post(
            "/organizations/acme/members",
            json={"username": "bob", "role": "member"},
            headers=bearer("alice"),
        )
        assert added.status_code == 201
        assert added.json() == {"username": "bob", "role": "member"}
        org = await client.get("/organizations/acme", headers=bearer("bob"))
        assert org.status_code == 200
        assert {m["username"]: m["role"] for m in org.json()["members"]} == {
            "alice": "owner",
            "bob": "member",
        }

        removed = await client.delete("/organizations/acme/members/bob", headers=bearer("alice"))
        assert removed.status_code == 204
        assert (await client.get("/organizations/acme", headers=bearer("bob"))).status_code == 403

    async def test_member_may_not_add(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        await create_user(database, identity_provider, "bob")
        await create_user(database, identity_provider, "carol")
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        await client.post(
            "/organizations/acme/members", json={"username": "bob"}, headers=bearer("alice")
        )
        response = await client.post(
            "/organizations/acme/members", json={"username": "carol"}, headers=bearer("bob")
        )
        assert response.status_code == 403
        assert response.json()["detail"].startswith("PermissionDenied: ")

    async def test_admin_manages_any_organization(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        await create_user(database, identity_provider, "bob")
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        admin = bearer("root", roles=["admin", "user"])
        assert (await client.get("/organizations/acme", headers=admin)).status_code == 200
        response = await client.post(
            "/organizations/acme/members", json={"username": "bob", "role": "owner"}, headers=admin
        )
        assert response.status_code == 201

    async def test_a_member_may_leave(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        await create_user(database, identity_provider, "bob")
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        await client.post(
            "/organizations/acme/members", json={"username": "bob"}, headers=bearer("alice")
        )
        response = await client.delete("/organizations/acme/members/bob", headers=bearer("bob"))
        assert response.status_code == 204

    async def test_the_last_owner_cannot_leave(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        response = await client.delete("/organizations/acme/members/alice", headers=bearer())
        assert response.status_code == 409

    async def test_unknown_user_and_organization_are_404(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        unknown_user = await client.post(
            "/organizations/acme/members", json={"username": "nobody"}, headers=bearer()
        )
        assert unknown_user.status_code == 404
        assert (await client.get("/organizations/nope", headers=bearer())).status_code == 404

    async def test_bad_role_is_422(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        await client.post("/organizations", json={"slug": "acme", "name": "A"}, headers=bearer())
        response = await client.post(
            "/organizations/acme/members",
            json={"username": "alice", "role": "king"},
            headers=bearer(),
        )
        assert response.status_code == 422
