"""Who may publish, manage and read packages and their versions (contract 4; spec: Errors)."""

from __future__ import annotations

import httpx

from calcgraph.db.engine import Database
from tests.access.factories import create_organization, create_user
from tests.auth.idp import LocalIdentityProvider
from tests.packages.publishing import Bearer, publish, small_body

ADMIN = ("admin", "user")


async def test_private_package_is_hidden_from_others(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    report = await publish(client, bearer("alice"), small_body("secret", "1.0.0"))
    for path in ("/packages/secret/versions", f"/packages/{report['package_id']}/versions"):
        response = await client.get(path, headers=bearer("bob"))
        assert response.status_code == 403
        assert response.json()["detail"].startswith("PermissionDenied: ")
    response = await client.get("/functions/run/versions?package=secret", headers=bearer("bob"))
    assert response.status_code == 403
    # Without a package, a name only finds functions of visible packages.
    response = await client.get("/functions/run/versions", headers=bearer("bob"))
    assert response.status_code == 404
    function_id = report["functions"][0]["id"]
    assert (await client.get(f"/functions/{function_id}", headers=bearer("bob"))).status_code == 403
    admin = await client.get("/packages/secret/versions", headers=bearer("root", roles=ADMIN))
    assert admin.status_code == 200
    assert (
        await client.get("/packages/nothing/versions", headers=bearer("bob"))
    ).status_code == 404


async def test_only_managers_publish_new_versions(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    await publish(client, bearer("alice"), small_body("mine", "1.0.0", visibility="public"))
    response = await client.post(
        "/packages", json=small_body("mine", "1.1.0"), headers=bearer("bob")
    )
    assert response.status_code == 403
    assert response.json()["detail"].startswith("PermissionDenied: ")
    await publish(client, bearer("root", roles=ADMIN), small_body("mine", "1.1.0"))
    listing = (await client.get("/packages/mine/versions", headers=bearer("bob"))).json()
    assert [v["version"] for v in listing["versions"]] == ["1.0.0", "1.1.0"]


async def test_organization_packages(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    bob = await create_user(database, identity_provider, "bob")
    dave = await create_user(database, identity_provider, "dave")
    await create_organization(database, "acme", {alice: "owner", bob: "member", dave: "member"})

    internal = small_body("acme-tools", "1.0.0", visibility="internal", organization="acme")
    report = await publish(client, bearer("bob"), internal)
    package = (await client.get(f"/packages/{report['package_id']}", headers=bearer("bob"))).json()
    assert package["organization"] == "acme"
    assert package["visibility"] == "internal"

    # Members read it; outsiders get 403.
    assert (await client.get("/packages/acme-tools/versions", headers=bearer("dave"))).is_success
    outsider = await client.get("/packages/acme-tools/versions", headers=bearer("carol"))
    assert outsider.status_code == 403

    # An owner of the owning organization manages it; a plain member does not.
    await publish(client, bearer("alice"), small_body("acme-tools", "1.1.0"))
    refused = await client.post(
        "/packages", json=small_body("acme-tools", "1.2.0"), headers=bearer("dave")
    )
    assert refused.status_code == 403

    # Publishing into an organization needs membership; internal needs an organization.
    carol_body = small_body("carol-tools", "1.0.0", visibility="internal", organization="acme")
    assert (
        await client.post("/packages", json=carol_body, headers=bearer("carol"))
    ).status_code == 403
    no_org = small_body("lonely", "1.0.0", visibility="internal")
    response = await client.post("/packages", json=no_org, headers=bearer("carol"))
    assert response.status_code == 422
    assert ["organization"] in [e["loc"] for e in response.json()["errors"]]
    unknown = small_body("lost", "1.0.0", organization="no-such-org")
    assert (await client.post("/packages", json=unknown, headers=bearer("bob"))).status_code == 404


async def test_republish_keeps_visibility_unless_sent(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    alice = bearer("alice")
    report = await publish(client, alice, small_body("keep", "1.0.0", visibility="public"))
    await publish(client, alice, small_body("keep", "1.1.0"))
    package = (await client.get(f"/packages/{report['package_id']}", headers=alice)).json()
    assert package["visibility"] == "public"
    await publish(client, alice, small_body("keep", "1.2.0", visibility="private"))
    assert (await client.get("/packages/keep/versions", headers=bearer("bob"))).status_code == 403


async def test_patch_visibility(client: httpx.AsyncClient, bearer: Bearer) -> None:
    report = await publish(client, bearer("alice"), small_body("patchme", "1.0.0"))
    path = f"/packages/{report['package_id']}"
    assert (await client.get(path, headers=bearer("bob"))).status_code == 403

    response = await client.patch(path, json={"visibility": "public"}, headers=bearer("alice"))
    assert response.status_code == 200, response.text
    assert response.json()["visibility"] == "public"
    assert (await client.get(path, headers=bearer("bob"))).status_code == 200

    refused = await client.patch(path, json={"visibility": "private"}, headers=bearer("bob"))
    assert refused.status_code == 403
    no_org = await client.patch(path, json={"visibility": "internal"}, headers=bearer("alice"))
    assert no_org.status_code == 422
    bad = await client.patch(path, json={"visibility": "secret"}, headers=bearer("alice"))
    assert bad.status_code == 422
    admin = await client.patch(
        path, json={"visibility": "private"}, headers=bearer("root", roles=ADMIN)
    )
    assert admin.status_code == 200
    assert (await client.get(path, headers=bearer("bob"))).status_code == 403
    missing = await client.patch(
        "/packages/nope", json={"visibility": "public"}, headers=bearer("alice")
    )
    assert missing.status_code == 404
