"""Contract 11, Dependencies, through both doors on both databases: ranges resolve to pins at
deployment, the report and the version detail show them, a new dependency release changes
nothing until the package is deployed again, and the hostile cases are 422s that reveal
nothing about packages the deployer may not see."""

from __future__ import annotations

from typing import Any

import httpx

from tests.packages.publishing import Bearer, by_name, publish, small_body

LIB_CODE = "def double(x):\n    return 2 * x\n"
APP_CODE = "from lib_a import helpers\n\ndef run(x):\n    return {'y': helpers.double(x)}\n"


def lib(name: str, version: str, deps: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    body = small_body(name, version, **kw)
    body["files"]["helpers.py"] = LIB_CODE
    if deps:
        body["manifest"]["package"]["dependencies"] = deps
    return body


def app(
    name: str, version: str, deps: dict[str, str], code: str = APP_CODE, **kw: Any
) -> dict[str, Any]:
    body = small_body(name, version, code=code, **kw)
    body["manifest"]["package"]["dependencies"] = deps
    return body


async def refusal(
    client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    response = await client.post("/packages", json=body, headers=headers)
    assert response.status_code == 422, response.text
    answer: dict[str, Any] = response.json()
    assert answer["detail"].startswith("ValidationError: ")
    # Nothing was written.
    name = body["manifest"]["package"]["name"]
    versions = await client.get(f"/packages/{name}/versions", headers=headers)
    if versions.status_code == 200:
        listed = [v["version"] for v in versions.json()["versions"]]
        assert body["manifest"]["package"]["version"] not in listed
    return answer


class TestResolution:
    async def test_pins_are_reported_shown_and_kept(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("lib-c", "0.1.0"))
        await publish(client, alice, lib("lib-b", "1.0.0", {"lib-c": "^0.1"}))
        for version in ("1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"):
            await publish(client, alice, lib("lib-a", version, {"lib-b": "1.0.0"}))
        report = await publish(client, alice, app("dep-app", "1.0.0", {"lib-a": "^1.0"}))
        # The newest admitted stable version; what it pinned comes along.
        assert report["dependencies"] == {"lib-a": "1.1.0"}
        assert report["dependency_closure"] == {
            "lib-a": "1.1.0",
            "lib-b": "1.0.0",
            "lib-c": "0.1.0",
        }
        first = by_name(report)["run"]

        detail = await client.get("/packages/dep-app/versions/1.0.0", headers=alice)
        assert detail.status_code == 200, detail.text
        pinned = detail.json()["pinned_dependencies"]
        assert [(p["name"], p["version"], p["direct"], p["range"]) for p in pinned] == [
            ("lib-a", "1.1.0", True, "^1.0"),
            ("lib-b", "1.0.0", False, None),
            ("lib-c", "0.1.0", False, None),
        ]
        assert detail.json()["dependencies"] == {"lib-a": "^1.0"}

        # A later release of the dependency changes nothing until the package is deployed:
        await publish(client, alice, lib("lib-a", "1.3.0", {"lib-b": "1.0.0"}))
        again = await client.get("/packages/dep-app/versions/1.0.0", headers=alice)
        assert again.json()["pinned_dependencies"][0]["version"] == "1.1.0"
        # ... and then the unchanged code is a new function version, since it imports them.
        second = await publish(client, alice, app("dep-app", "1.0.1", {"lib-a": "^1.0"}))
        assert second["dependencies"] == {"lib-a": "1.3.0"}
        run = by_name(second)["run"]
        assert (run["status"], run["version"]) == ("updated", "1.0.1")
        assert run["version_id"] != first["version_id"]
        assert any("dependencies" in w for w in second["warnings"])
        # Same pins again: unchanged, the same immutable version.
        third = await publish(client, alice, app("dep-app", "1.0.2", {"lib-a": "^1.0"}))
        assert by_name(third)["run"]["version_id"] == run["version_id"]

    async def test_manual_versioning_needs_a_bump_for_new_pins(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("man-lib", "1.0.0"))
        fixed = {"run": {"handler": "main:run", "version": "1.0.0", **IO}}
        code = "from man_lib import helpers\n\ndef run(x):\n    return {'y': helpers.double(x)}\n"
        body = app("man-app", "1.0.0", {"man-lib": "^1"}, code, strategy="manual", functions=fixed)
        await publish(client, alice, body)
        await publish(client, alice, lib("man-lib", "1.1.0"))
        body = app("man-app", "1.0.1", {"man-lib": "^1"}, code, strategy="manual", functions=fixed)
        response = await client.post("/packages", json=body, headers=alice)
        assert response.status_code == 409, response.text
        assert "dependencies" in response.json()["detail"]

    async def test_prerelease_only_when_the_range_names_one(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        for version in ("1.0.0", "1.1.0-rc.1"):
            await publish(client, alice, lib("pre-lib", version))
        plain = await publish(client, alice, app("pre-app", "1.0.0", {"pre-lib": "^1"}))
        assert plain["dependencies"] == {"pre-lib": "1.0.0"}
        named = await publish(client, alice, app("pre-app", "1.0.1", {"pre-lib": ">=1.1.0-rc.1"}))
        assert named["dependencies"] == {"pre-lib": "1.1.0-rc.1"}

    async def test_graphql_shows_pins_and_the_report(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("gq-lib", "1.0.0"))
        body = app("gq-app", "1.0.0", {"gq-lib": "*"})
        mutation = (
            "mutation($manifest: JSON!, $files: JSON!) { publishPackage(manifest: $manifest, "
            "files: $files) { ... on DeploymentReport { dependencies dependencyClosure } } }"
        )
        published = await client.post(
            "/graphql",
            json={"query": mutation, "variables": body},
            headers=alice,
        )
        assert published.status_code == 200, published.text
        report = published.json()["data"]["publishPackage"]
        assert report == {
            "dependencies": {"gq-lib": "1.0.0"},
            "dependencyClosure": {"gq-lib": "1.0.0"},
        }
        query = (
            'query { packageVersion(package: "gq-app", version: "1.0.0") '
            "{ dependencies pinnedDependencies { name version packageId direct range } } }"
        )
        answer = await client.post("/graphql", json={"query": query}, headers=alice)
        detail = answer.json()["data"]["packageVersion"]
        assert detail["dependencies"] == {"gq-lib": "*"}
        [pinned] = detail["pinnedDependencies"]
        assert (pinned["name"], pinned["version"], pinned["direct"], pinned["range"]) == (
            "gq-lib",
            "1.0.0",
            True,
            "*",
        )


IO = {
    "inputs": {"x": {"type": "Float", "description": "x", "required": True}},
    "outputs": {"y": {"type": "Float", "description": "y"}},
}


class TestHostile:
    async def test_another_users_private_package_reads_as_missing(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(client, bearer("bob"), lib("bobs-secret", "1.0.0", visibility="private"))
        mallory = bearer("mallory")
        hidden = await refusal(client, mallory, app("mal-app", "1.0.0", {"bobs-secret": "^1"}))
        missing = await refusal(client, mallory, app("mal-app", "1.0.0", {"no-such-pkg": "^1"}))
        # Word for word the same, with the names swapped: no versions, no owner, no hint.
        assert hidden["detail"].replace("bobs-secret", "X") == missing["detail"].replace(
            "no-such-pkg", "X"
        )
        assert hidden["errors"] == [
            {
                "loc": ["manifest", "package", "dependencies", "bobs-secret"],
                "msg": hidden["errors"][0]["msg"],
            }
        ]
        assert "1.0.0" not in hidden["detail"]
        assert "bob" not in hidden["detail"].replace("bobs-secret", "")
        # A range naming a version that exists gives the same answer too.
        exact = await refusal(client, mallory, app("mal-app", "1.0.0", {"bobs-secret": "1.0.0"}))
        assert exact["detail"] == hidden["detail"]
        # Once public, the same deployment goes through.
        await client.patch(
            "/packages/bobs-secret", json={"visibility": "public"}, headers=bearer("bob")
        )
        report = await publish(client, mallory, app("mal-app", "1.0.0", {"bobs-secret": "^1"}))
        assert report["dependencies"] == {"bobs-secret": "1.0.0"}

    async def test_two_versions_of_one_package_in_the_closure(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("dup-base", "1.0.0"))
        await publish(client, alice, lib("dup-base", "2.0.0"))
        await publish(client, alice, lib("dup-mid", "1.0.0", {"dup-base": "^1"}))
        answer = await refusal(
            client, alice, app("dup-app", "1.0.0", {"dup-mid": "^1", "dup-base": "^2"})
        )
        assert "two versions of package 'dup-base'" in answer["detail"]
        assert "2.0.0 declared" in answer["detail"]
        assert "1.0.0 via dup-mid 1.0.0" in answer["detail"]

    async def test_module_name_clash_with_the_own_files(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("clash-lib", "1.0.0"))
        body = app("clash-app", "1.0.0", {"clash-lib": "^1"})
        body["files"]["clash_lib/__init__.py"] = ""
        answer = await refusal(client, alice, body)
        assert "'clash_lib'" in answer["detail"]
        assert answer["errors"][0]["loc"] == ["manifest", "package", "dependencies", "clash-lib"]

    async def test_a_range_admitting_nothing_lists_the_versions(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        for version in ("1.0.0", "1.4.0", "2.0.0-rc.1"):
            await publish(client, alice, lib("few-lib", version))
        answer = await refusal(client, alice, app("few-app", "1.0.0", {"few-lib": ">=3"}))
        assert "'few-lib'" in answer["detail"]
        assert "versions: 1.0.0, 1.4.0, 2.0.0-rc.1" in answer["detail"]

    async def test_a_cycle_back_to_the_package_is_422(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, lib("cyc-app", "1.0.0"))
        await publish(client, alice, lib("cyc-lib", "1.0.0", {"cyc-app": "^1"}))
        answer = await refusal(client, alice, app("cyc-app", "2.0.0", {"cyc-lib": "^1"}))
        assert "'cyc-app' is in its own dependency closure" in answer["detail"]

    async def test_no_token_is_401(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/packages/anything/versions/1.0.0")
        assert response.status_code == 401
