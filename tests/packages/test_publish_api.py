"""POST /packages: the deployment report, the auto and manual rules, latest and stable,
several versions hosted at once, stored code. Through HTTP on both databases."""

from __future__ import annotations

import httpx

from calcgraph.db.engine import Database
from calcgraph.demo import package_files
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.packages.checksums import source_checksum
from tests.packages.publishing import Bearer, by_name, demo_body, publish, small_body

DEMO_FUNCTIONS = {"cantilever", "stress_check", "deflection_check", "verdict"}


class TestFirstPublish:
    async def test_demo_package_report(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        report = await publish(client, bearer("alice"), demo_body())
        assert report["package"] == "demo-beam"
        assert report["package_version"] == "1.2.0"
        assert report["is_latest"]
        assert report["is_stable"]
        assert report["git_ref"] is None
        assert report["git_commit"] is None
        functions = by_name(report)
        assert set(functions) == DEMO_FUNCTIONS
        for f in functions.values():
            assert f["status"] == "new"
            assert f["version"] == "1.2.0"  # a new function takes the package version
            assert f["endpoint"] == f"/functions/{f['version_id']}/execute"
            assert len(f["checksum"]) == 64
        assert functions["cantilever"]["checksum"] == source_checksum(package_files()["beam.py"])
        assert functions["verdict"]["changelog"] == (
            "feature: safety-factor verdict combining strength and stiffness"
        )

        package = await client.get(f"/packages/{report['package_id']}", headers=bearer("alice"))
        assert package.status_code == 200
        assert package.json()["current_version"] == "1.2.0"
        assert package.json()["visibility"] == "private"
        assert package.json()["owner"] == "alice"

    async def test_function_record_has_every_field(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        report = await publish(client, bearer("alice"), demo_body())
        cantilever = by_name(report)["cantilever"]
        response = await client.get(f"/functions/{cantilever['id']}", headers=bearer("alice"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["name"] == "cantilever"
        assert body["package"] == "demo-beam"
        assert body["current_version"] == "1.2.0"
        assert body["typed"] is True
        assert body["inputs"]["length"] == {
            "type": "Length",
            "description": "span from the support to the tip",
            "required": True,
        }
        current = body["current"]
        assert current["id"] == cantilever["version_id"]
        assert current["package_version_id"] == report["package_version_id"]
        for key in (
            "function_id",
            "handler",
            "code_checksum",
            "inputs_schema",
            "outputs_schema",
            "changelog",
            "is_breaking_change",
            "deprecated",
            "created_at",
            "deployed_at",
        ):
            assert key in current
        assert current["handler"] == "beam:cantilever"

    async def test_stored_code_is_what_was_sent(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        report = await publish(client, bearer("alice"), demo_body())
        version_id = by_name(report)["stress_check"]["version_id"]
        async with database.read_session() as session:
            files = await function_version_service.code_files(session, version_id)
        sent = package_files()
        assert files["checks.py"] == sent["checks.py"].encode()
        assert files["beam.py"] == sent["beam.py"].encode()

    async def test_invalid_manifest_and_paths_are_422(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        body = small_body("bad", "1.0.0")
        body["manifest"]["functions"]["run"]["handler"] = "missing:run"
        response = await client.post("/packages", json=body, headers=bearer("alice"))
        assert response.status_code == 422
        assert response.json()["detail"].startswith("ValidationError: ")
        body = small_body("bad", "1.0.0")
        body["files"]["../escape.py"] = "x = 1\n"
        response = await client.post("/packages", json=body, headers=bearer("alice"))
        assert response.status_code == 422
        assert ["files", "../escape.py"] in [e["loc"] for e in response.json()["errors"]]
        response = await client.post("/packages", json={"files": {}}, headers=bearer("alice"))
        assert response.status_code == 422

    async def test_yaml_text_manifest(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        files = package_files()
        manifest = files.pop("calcgraph.yaml")
        report = await publish(client, bearer("alice"), {"manifest": manifest, "files": files})
        assert report["package_version"] == "1.2.0"

    async def test_needs_a_token(self, client: httpx.AsyncClient) -> None:
        response = await client.post("/packages", json=demo_body())
        assert response.status_code == 401


class TestAutoRule:
    async def test_unchanged_updated_new(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        alice = bearer("alice")
        first = by_name(await publish(client, alice, demo_body()))
        changed = package_files()["checks.py"].replace("125.0", "150.0")
        body = demo_body("1.3.0", files={"checks.py": changed})
        body["manifest"]["functions"]["summary"] = {"handler": "beam:cantilever"}
        second = await publish(client, alice, body)
        functions = by_name(second)
        assert functions["cantilever"]["status"] == "unchanged"
        assert functions["cantilever"]["version"] == "1.2.0"
        assert functions["cantilever"]["version_id"] == first["cantilever"]["version_id"]
        for name in ("stress_check", "deflection_check", "verdict"):
            assert functions[name]["status"] == "updated"
            assert functions[name]["version"] == "1.2.1"  # PATCH bumped
            assert functions[name]["version_id"] != first[name]["version_id"]
            assert functions[name]["id"] == first[name]["id"]  # the function is the same
        assert functions["summary"] == {**functions["summary"], "status": "new", "version": "1.3.0"}

    async def test_same_version_twice_is_409(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(client, bearer("alice"), demo_body())
        response = await client.post("/packages", json=demo_body(), headers=bearer("alice"))
        assert response.status_code == 409
        assert response.json()["detail"].startswith("Conflict: ")
        assert "1.2.0" in response.json()["detail"]


class TestManualRule:
    async def test_unchanged_version_with_changed_code_is_refused(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("manual", "1.0.0", strategy="manual"))
        body = small_body(
            "manual", "1.1.0", strategy="manual", code="def run(x):\n    return {'y': 2 * x}\n"
        )
        body["manifest"]["functions"]["run"]["version"] = "1.0.0"
        response = await client.post("/packages", json=body, headers=alice)
        assert response.status_code == 409
        assert "bump the version" in response.json()["detail"]

        body["manifest"]["functions"]["run"]["version"] = "1.0.1"
        report = await publish(client, alice, body)
        assert by_name(report)["run"] == {
            **by_name(report)["run"],
            "status": "updated",
            "version": "1.0.1",
        }

    async def test_unchanged_code_keeps_the_version(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        first = await publish(client, alice, small_body("manual2", "1.0.0", strategy="manual"))
        body = small_body("manual2", "1.0.1", strategy="manual")
        body["manifest"]["functions"]["run"]["version"] = "1.0.0"
        second = await publish(client, alice, body)
        assert by_name(second)["run"]["status"] == "unchanged"
        assert by_name(second)["run"]["version_id"] == by_name(first)["run"]["version_id"]


class TestLatestAndStable:
    async def test_pre_release_is_hosted_but_not_latest(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("rel", "1.0.0"))
        code = "def run(x):\n    return {'y': x + 1}\n"
        rc = await publish(client, alice, small_body("rel", "2.0.0-rc.1", code=code))
        assert rc["is_stable"] is False
        assert rc["is_latest"] is False
        # The function's current version follows the latest package version: unchanged.
        assert by_name(rc)["run"]["version"] == "1.0.1"
        listing = (await client.get("/packages/rel/versions", headers=alice)).json()
        assert listing["current_version"] == "1.0.0"
        flags = {v["version"]: (v["is_latest"], v["is_stable"]) for v in listing["versions"]}
        assert flags == {"1.0.0": (True, True), "2.0.0-rc.1": (False, False)}
        function = (await client.get("/functions/run/versions?package=rel", headers=alice)).json()
        assert function["current_version"] == "1.0.0"

        final = await publish(client, alice, small_body("rel", "2.0.0", code=code))
        assert final["is_latest"] is True
        listing = (await client.get("/packages/rel/versions", headers=alice)).json()
        latest = [v["version"] for v in listing["versions"] if v["is_latest"]]
        assert latest == ["2.0.0"]  # moved, never two
        assert listing["current_version"] == "2.0.0"

    async def test_maintenance_release_does_not_move_latest(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("maint", "1.0.0"))
        await publish(client, alice, small_body("maint", "2.0.0", code="def run(x): return x\n"))
        old = await publish(
            client, alice, small_body("maint", "1.0.1", code="def run(x): return -x\n")
        )
        assert old["is_latest"] is False
        listing = (await client.get("/packages/maint/versions", headers=alice)).json()
        assert [v["version"] for v in listing["versions"]] == ["1.0.0", "2.0.0", "1.0.1"]
        assert listing["current_version"] == "2.0.0"


class TestBreakingAndDeprecated:
    async def test_breaking_change_is_flagged(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("brk", "1.0.0"))
        body = small_body("brk", "1.1.0", code="def run(x, z):\n    return {'y': x + z}\n")
        body["manifest"]["functions"]["run"]["inputs"]["z"] = {"type": "Float", "required": True}
        report = await publish(client, alice, body)
        run = by_name(report)["run"]
        assert run["is_breaking_change"] is True
        assert "input 'z' was added as required" in run["breaking_reasons"]
        listing = (await client.get("/functions/run/versions?package=brk", headers=alice)).json()
        assert [v["is_breaking_change"] for v in listing["versions"]] == [False, True]

    async def test_changelog_breaking_entry(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("brk2", "1.0.0"))
        changelog = {
            "2.0.0": {
                "date": "2026-11-02",
                "changes": [{"type": "breaking", "description": "y is now doubled"}],
            }
        }
        body = small_body(
            "brk2", "2.0.0", code="def run(x):\n    return {'y': 2 * x}\n", changelog=changelog
        )
        run = by_name(await publish(client, alice, body))["run"]
        assert run["is_breaking_change"] is True
        assert run["changelog"] == "breaking: y is now doubled"
        listing = (await client.get("/packages/brk2/versions", headers=alice)).json()
        assert listing["versions"][1]["changelog"]["changes"][0]["type"] == "breaking"

    async def test_deprecation_surfaces_in_listings(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, small_body("dep", "1.0.0"))
        body = small_body("dep", "1.1.0")
        body["manifest"]["functions"]["run"].update(
            deprecated=True, deprecated_message="use run2", removal_version="2.0.0"
        )
        report = await publish(client, alice, body)
        # The code is unchanged, but a version is immutable: the deprecation is a new one.
        assert by_name(report)["run"]["status"] == "updated"
        assert by_name(report)["run"]["deprecated"] is True
        listing = (await client.get("/functions/run/versions?package=dep", headers=alice)).json()
        assert [(v["version"], v["deprecated"]) for v in listing["versions"]] == [
            ("1.0.0", False),
            ("1.0.1", True),
        ]
        assert listing["versions"][1]["deprecated_message"] == "use run2"
