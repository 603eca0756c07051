"""Listings filter in SQL; single reads answer 403; access follows the current state."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from calcgraph.db.engine import Database
from tests.access.factories import (
    create_job,
    create_organization,
    create_package,
    create_user,
    set_visibility,
)
from tests.auth.idp import LocalIdentityProvider

Bearer = Callable[..., dict[str, str]]


async def ids(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> set[str]:
    response = await client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


async def test_listing_shows_only_what_the_caller_may_see(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    bob = await create_user(database, identity_provider, "bob")
    acme = await create_organization(database, "acme", {alice: "owner", bob: "member"})
    mine = await create_package(database, alice, "alice-private", "private")
    shared = await create_package(database, alice, "acme-internal", "internal", acme)
    open_ = await create_package(database, alice, "everyone", "public")

    assert await ids(client, "/packages", bearer("alice")) == {
        mine.package_id,
        shared.package_id,
        open_.package_id,
    }
    assert await ids(client, "/packages", bearer("bob")) == {shared.package_id, open_.package_id}
    assert await ids(client, "/packages", bearer("carol")) == {open_.package_id}
    assert await ids(client, "/functions", bearer("carol")) == {open_.function_id}

    denied = await client.get(f"/packages/{mine.package_id}", headers=bearer("bob"))
    assert denied.status_code == 403
    assert denied.json()["detail"].startswith("PermissionDenied: ")
    missing = await client.get("/packages/no-such-id", headers=bearer("bob"))
    assert missing.status_code == 404


async def test_jobs_disappear_when_the_package_becomes_less_visible(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    bob = await create_user(database, identity_provider, "bob")
    acme = await create_organization(database, "acme", {alice: "owner", bob: "member"})
    rows = await create_package(database, alice, "shared", "public", acme)
    job_id = await create_job(database, rows, bob)

    assert await ids(client, "/jobs", bearer("bob")) == {job_id}
    assert (await client.get(f"/jobs/{job_id}", headers=bearer("bob"))).status_code == 200

    await set_visibility(database, rows.package_id, "internal")
    assert await ids(client, "/jobs", bearer("bob")) == {job_id}

    await set_visibility(database, rows.package_id, "private")
    assert await ids(client, "/jobs", bearer("bob")) == set()
    response = await client.get(f"/jobs/{job_id}", headers=bearer("bob"))
    assert response.status_code == 403
    assert response.json()["detail"].startswith("PermissionDenied: ")


async def test_jobs_disappear_when_the_caller_leaves_the_organization(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    bob = await create_user(database, identity_provider, "bob")
    acme = await create_organization(database, "acme", {alice: "owner", bob: "member"})
    rows = await create_package(database, alice, "shared", "internal", acme)
    job_id = await create_job(database, rows, bob)
    assert await ids(client, "/jobs", bearer("bob")) == {job_id}

    left = await client.delete("/organizations/acme/members/bob", headers=bearer("bob"))
    assert left.status_code == 204
    assert await ids(client, "/jobs", bearer("bob")) == set()
    assert (await client.get(f"/jobs/{job_id}", headers=bearer("bob"))).status_code == 403
    package = await client.get(f"/packages/{rows.package_id}", headers=bearer("bob"))
    assert package.status_code == 403


async def test_a_job_is_its_submitters(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    rows = await create_package(database, alice, "open", "public")
    job_id = await create_job(database, rows, alice)
    assert await ids(client, "/jobs", bearer("bob")) == set()
    assert (await client.get(f"/jobs/{job_id}", headers=bearer("bob"))).status_code == 403
    admin = bearer("root", roles=["admin", "user"])
    assert (await client.get(f"/jobs/{job_id}", headers=admin)).json()["outputs"] == {"y": 2}
    assert (await client.get("/jobs/unknown", headers=admin)).status_code == 404


async def test_pagination(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    created = [
        (await create_package(database, alice, f"pkg-{i}", "private")).package_id for i in range(5)
    ]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        body = (await client.get("/packages", params=params, headers=bearer())).json()
        seen += [item["id"] for item in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(created)
    assert len(seen) == len(set(seen))
    assert pages == 3


async def test_bad_limit_and_cursor_are_422(client: httpx.AsyncClient, bearer: Bearer) -> None:
    for params in ({"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"cursor": "garbage"}):
        response = await client.get("/packages", params=params, headers=bearer())
        assert response.status_code == 422, params
        assert response.json()["detail"].startswith("ValidationError: ")
