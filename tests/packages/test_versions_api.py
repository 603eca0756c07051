"""GET /packages/{name}/versions and GET /functions/{name}/versions (spec: Versioned calls
and version listings)."""

from __future__ import annotations

from typing import Any

import httpx

from calcgraph.demo import package_files
from tests.packages.publishing import Bearer, by_name, demo_body, publish, small_body

Report = dict[str, Any]


async def deploy_twice(client: httpx.AsyncClient, bearer: Bearer) -> tuple[Report, Report]:
    first = await publish(client, bearer("alice"), demo_body())
    changed = package_files()["checks.py"].replace("125.0", "150.0")
    second = await publish(
        client, bearer("alice"), demo_body("1.3.0", files={"checks.py": changed})
    )
    return first, second


async def test_same_function_version_appears_once_per_deployment(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    first, second = await deploy_twice(client, bearer)
    response = await client.get("/functions/cantilever/versions", headers=bearer("alice"))
    assert response.status_code == 200, response.text
    listing = response.json()
    assert listing["function"] == "cantilever"
    assert listing["package"] == "demo-beam"
    assert listing["current_version"] == "1.2.0"
    rows = [(v["version"], v["package_version"], v["status"]) for v in listing["versions"]]
    assert rows == [("1.2.0", "1.2.0", "new"), ("1.2.0", "1.3.0", "unchanged")]
    ids = {v["version_id"] for v in listing["versions"]}
    assert ids == {by_name(first)["cantilever"]["version_id"]}
    for entry in listing["versions"]:
        assert {"deployed_at", "changelog", "deprecated"} <= set(entry)

    checks = (await client.get("/functions/verdict/versions", headers=bearer("alice"))).json()
    assert [(v["version"], v["package_version"]) for v in checks["versions"]] == [
        ("1.2.0", "1.2.0"),
        ("1.2.1", "1.3.0"),
    ]
    assert checks["current_version"] == "1.2.1"
    assert checks["current_version_id"] == by_name(second)["verdict"]["version_id"]


async def test_package_versions_listing(client: httpx.AsyncClient, bearer: Bearer) -> None:
    first, second = await deploy_twice(client, bearer)
    for ref in ("demo-beam", first["package_id"]):
        response = await client.get(f"/packages/{ref}/versions", headers=bearer("alice"))
        assert response.status_code == 200, response.text
        listing = response.json()
        assert listing["package"] == "demo-beam"
        assert listing["current_version"] == "1.3.0"
        assert [v["version"] for v in listing["versions"]] == ["1.2.0", "1.3.0"]
        newest = listing["versions"][1]
        assert newest["id"] == second["package_version_id"]
        assert newest["is_latest"]
        assert not listing["versions"][0]["is_latest"]
        assert {f["name"]: f["version"] for f in newest["functions"]} == {
            "cantilever": "1.2.0",
            "deflection_check": "1.2.1",
            "stress_check": "1.2.1",
            "verdict": "1.2.1",
        }
        assert listing["versions"][0]["changelog"]["changes"][0]["type"] == "feature"
        assert newest["changelog"] is None
        assert {"deployed_at", "git_ref", "git_commit", "is_stable"} <= set(newest)


async def test_ambiguous_function_names(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    one = await publish(client, alice, small_body("one", "1.0.0"))
    await publish(client, alice, small_body("two", "1.0.0"))
    response = await client.get("/functions/run/versions", headers=alice)
    assert response.status_code == 409
    assert response.json()["candidates"] == ["one/run", "two/run"]
    picked = await client.get("/functions/run/versions?package=two", headers=alice)
    assert picked.status_code == 200
    assert picked.json()["package"] == "two"
    # Only one is visible to bob: no ambiguity for him... once one is public.
    await client.patch(
        f"/packages/{one['package_id']}", json={"visibility": "public"}, headers=alice
    )
    bobs = await client.get("/functions/run/versions", headers=bearer("bob"))
    assert bobs.status_code == 200
    assert bobs.json()["package"] == "one"
    by_id = await client.get(f"/functions/{one['functions'][0]['id']}/versions", headers=alice)
    assert by_id.status_code == 200
    assert by_id.json()["package"] == "one"


async def test_unknown_names_are_404(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    await publish(client, alice, small_body("known", "1.0.0"))
    missing = await client.get("/functions/nope/versions?package=known", headers=alice)
    assert missing.status_code == 404
    assert missing.json()["detail"].startswith("NotFound: ")
    assert (
        await client.get("/functions/run/versions?package=nope", headers=alice)
    ).status_code == 404
    assert (await client.get("/functions/nope/versions", headers=alice)).status_code == 404
    assert (await client.get("/functions/no-such-id", headers=alice)).status_code == 404
