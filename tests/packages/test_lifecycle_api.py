"""Contract 11 through HTTP on both databases: removal refused, breaking changes refused under
manual and reported under auto, a version's compatibility, migration guide and changelog, the
interface diff, deprecated nodes in workflow validation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.packages.publishing import Bearer, publish, small_body

TYPED = {"inputs": {"x": {"type": "Length"}}, "outputs": {"y": {"type": "Length"}}}
FORCE_IN = {"inputs": {"x": {"type": "Force"}}, "outputs": {"y": {"type": "Length"}}}


def body(name: str, version: str, strategy: str = "auto", **fn: Any) -> dict[str, Any]:
    return small_body(
        name,
        version,
        strategy=strategy,
        functions={"run": {"handler": "main:run", **TYPED, **fn}},
    )


class TestRemoval:
    async def test_deployment_at_the_removal_version_is_422_naming_it(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        doomed = {"deprecated": True, "deprecated_message": "use v2", "removal_version": "2.0.0"}
        await publish(client, alice, body("rm-pkg", "1.0.0", **doomed))
        for version in ("2.0.0", "2.0.1"):
            response = await client.post(
                "/packages", json=body("rm-pkg", version, **doomed), headers=alice
            )
            assert response.status_code == 422, response.text
            assert response.json()["detail"].startswith("ValidationError: ")
            assert "run" in response.json()["detail"]
        # Dropping the declaration does not lift it: the current version declared it.
        response = await client.post("/packages", json=body("rm-pkg", "2.0.2"), headers=alice)
        assert response.status_code == 422
        versions = await client.get("/packages/rm-pkg/versions", headers=alice)
        assert [v["version"] for v in versions.json()["versions"]] == ["1.0.0"]


class TestBreakingChanges:
    async def test_manual_without_major_is_409_listing_each(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, body("brk-man", "1.0.0", "manual"))
        refused = small_body(
            "brk-man",
            "1.1.0",
            strategy="manual",
            code="def run(x):\n    return {'y': 2 * x}\n",
            functions={"run": {"handler": "main:run", **FORCE_IN}},
        )
        response = await client.post("/packages", json=refused, headers=alice)
        assert response.status_code == 409, response.text
        answer = response.json()
        assert answer["detail"].startswith("Conflict: ")
        assert "input 'x' changed type Length -> Force" in answer["detail"]
        assert [(c["function"], c["change"]) for c in answer["breaking_changes"]] == [
            ("run", "input_type")
        ]
        refused["manifest"]["package"]["version"] = "2.0.0"
        report = await publish(client, alice, refused)
        assert report["breaking_changes"][0]["port"] == "x"

    async def test_auto_reports_them(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        alice = bearer("alice")
        first = await publish(client, alice, body("brk-auto", "1.0.0"))
        assert first["breaking_changes"] == []
        changed = small_body(
            "brk-auto",
            "1.0.1",
            code="def run(x):\n    return {'y': 2 * x}\n",
            functions={"run": {"handler": "main:run", **FORCE_IN}},
        )
        report = await publish(client, alice, changed)
        assert [c["change"] for c in report["breaking_changes"]] == ["input_type"]
        assert report["breaking_changes"][0]["breaking"] is True

    async def test_a_compatible_widening_is_no_break(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, body("brk-ok", "1.0.0", "manual"))
        widened = small_body(
            "brk-ok",
            "1.1.0",
            strategy="manual",
            functions={
                "run": {
                    "handler": "main:run",
                    "inputs": {"x": {"type": "Float"}, "z": {"type": "Float", "required": False}},
                    "outputs": {"y": {"type": "Length"}, "w": {"type": "Float"}},
                }
            },
        )
        report = await publish(client, alice, widened)
        assert report["breaking_changes"] == []

    @pytest.mark.parametrize(
        ("name", "io", "change"),
        [
            (
                "input-removed",
                {"inputs": {}, "outputs": {"y": {"type": "Length"}}},
                "input_removed",
            ),
            (
                "output-removed",
                {"inputs": {"x": {"type": "Length"}}, "outputs": {"w": {"type": "Float"}}},
                "output_removed",
            ),
            (
                "input-required",
                {
                    "inputs": {"x": {"type": "Length"}, "n": {"type": "Float"}},
                    "outputs": {"y": {"type": "Length"}},
                },
                "input_added",
            ),
            (
                "output-type",
                {"inputs": {"x": {"type": "Length"}}, "outputs": {"y": {"type": "Force"}}},
                "output_type",
            ),
        ],
    )
    async def test_each_kind_of_break_is_409_under_manual_and_listed(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        name: str,
        io: dict[str, Any],
        change: str,
    ) -> None:
        """Contract 11's breaks one by one through the door: a removed input, a removed output, a
        new required input and an output that cannot connect to its old type."""
        alice = bearer("alice")
        package = f"brk-{name}"
        await publish(client, alice, body(package, "1.0.0", "manual"))
        changed = small_body(
            package, "1.1.0", strategy="manual", functions={"run": {"handler": "main:run", **io}}
        )
        response = await client.post("/packages", json=changed, headers=alice)
        assert response.status_code == 409, response.text
        answer = response.json()
        assert answer["detail"].startswith("Conflict: ")
        breaks = [(c["function"], c["change"]) for c in answer["breaking_changes"] if c["breaking"]]
        assert breaks == [("run", change)]
        versions = await client.get(f"/packages/{package}/versions", headers=alice)
        assert [v["version"] for v in versions.json()["versions"]] == ["1.0.0"]
        changed["manifest"]["package"]["version"] = "2.0.0"
        report = await publish(client, alice, changed)
        assert [c["change"] for c in report["breaking_changes"] if c["breaking"]] == [change]

    async def test_below_1_0_0_a_minor_bump_is_the_major_one(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, body("brk-zero", "0.1.0", "manual"))
        broken = small_body(
            "brk-zero",
            "0.1.1",
            strategy="manual",
            functions={"run": {"handler": "main:run", **FORCE_IN}},
        )
        response = await client.post("/packages", json=broken, headers=alice)
        assert response.status_code == 409, response.text
        assert "input 'x' changed type Length -> Force" in response.json()["detail"]
        broken["manifest"]["package"]["version"] = "0.2.0"
        report = await publish(client, alice, broken)
        assert [c["change"] for c in report["breaking_changes"]] == ["input_type"]


class TestVersionDetail:
    async def test_compatibility_migration_guide_changelog(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        request = body("detail-pkg", "1.0.0", deprecated=True, deprecated_message="use other")
        package = request["manifest"]["package"]
        package["compatibility"] = {"compatible_with": [">=0.9.0,<1.0.0"]}
        package["migration_guide"] = "rename x to span"
        package["changelog"] = {
            "1.0.0": {"date": "2026-11-01", "changes": [{"type": "feature", "description": "x"}]}
        }
        report = await publish(client, alice, request)
        pid = report["package_id"]
        for ref in (pid, "detail-pkg"):
            response = await client.get(f"/packages/{ref}/versions/1.0.0", headers=alice)
            assert response.status_code == 200, response.text
            detail = response.json()
            assert detail["compatibility"] == {"compatible_with": [">=0.9.0,<1.0.0"]}
            assert detail["migration_guide"] == "rename x to span"
            assert detail["changelog"]["changes"][0]["description"] == "x"
            (fn,) = detail["functions"]
            assert fn["name"] == "run"
            assert fn["deprecated"] is True
            assert fn["inputs_schema"]["x"]["type"] == "Length"
        latest = await client.get(f"/packages/{pid}/versions/latest", headers=alice)
        assert latest.json()["version"] == "1.0.0"

    async def test_hidden_and_unknown(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        report = await publish(client, bearer("alice"), body("detail-hidden", "1.0.0"))
        pid = report["package_id"]
        hidden = await client.get(f"/packages/{pid}/versions/1.0.0", headers=bearer("bob"))
        assert hidden.status_code == 403
        assert hidden.json()["detail"].startswith("PermissionDenied: ")
        unknown = await client.get(f"/packages/{pid}/versions/9.9.9", headers=bearer("alice"))
        assert unknown.status_code == 404
        nul = await client.get(f"/packages/{pid}/versions/1.0.0%00", headers=bearer("alice"))
        assert nul.status_code == 404
        anonymous = await client.get(f"/packages/{pid}/versions/1.0.0")
        assert anonymous.status_code == 401


class TestDiff:
    async def test_changes_between_two_versions(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        report = await publish(client, alice, body("diff-pkg", "1.0.0"))
        changed = small_body(
            "diff-pkg",
            "1.0.1",
            code="def run(x):\n    return {'y': 2 * x}\n",
            functions={
                "run": {"handler": "main:run", **FORCE_IN},
                "new": {"handler": "main:run", **TYPED},
            },
        )
        await publish(client, alice, changed)
        response = await client.get(
            f"/packages/{report['package_id']}/diff",
            params={"from_version": "1.0.0", "to_version": "1.0.1"},
            headers=alice,
        )
        assert response.status_code == 200, response.text
        diff = response.json()
        assert (diff["from_version"], diff["to_version"]) == ("1.0.0", "1.0.1")
        assert {(c["function"], c["change"], c["breaking"]) for c in diff["changes"]} == {
            ("new", "function_added", False),
            ("run", "input_type", True),
        }
        hidden = await client.get(
            f"/packages/{report['package_id']}/diff",
            params={"from_version": "1.0.0"},
            headers=bearer("bob"),
        )
        assert hidden.status_code == 403
        missing = await client.get(f"/packages/{report['package_id']}/diff", headers=alice)
        assert missing.status_code == 422


class TestDeprecatedInWorkflows:
    async def test_validation_lists_them_and_stays_valid(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        doomed = {"deprecated": True, "deprecated_message": "use v2", "removal_version": "2.0.0"}
        await publish(client, alice, body("dep-wf", "1.0.0", **doomed))
        graph = {
            "nodes": [
                {"node_key": "a", "kind": "input", "input_spec": {"type_expr": "Length"}},
                {
                    "node_key": "f",
                    "kind": "function",
                    "function": "dep-wf/run",
                    "input_bindings": {
                        "x": {"source": "input_node", "input_key": "a", "from_port": "value"}
                    },
                },
            ]
        }
        response = await client.post("/workflows/validate", json={"graph": graph}, headers=alice)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["valid"] is True
        (entry,) = answer["report"]["deprecated_functions"]
        assert entry["node_key"] == "f"
        assert entry["reason"] == "dep-wf/run is deprecated: use v2; removed in 2.0.0"
        created = await client.post(
            "/workflows",
            json={"slug": "dep-wf-flow", "name": "d", "graph": graph},
            headers=alice,
        )
        assert created.status_code == 201, created.text
        gql = await client.post(
            "/graphql",
            json={
                "query": "query($g: JSON!) { validateWorkflow(graph: $g) { valid report } }",
                "variables": {"g": graph},
            },
            headers=alice,
        )
        data = gql.json()["data"]["validateWorkflow"]
        assert data["valid"] is True
        assert data["report"]["deprecated_functions"][0]["node_key"] == "f"


class TestCanaryRefusedNotIgnored:
    async def test_a_split_naming_an_unhosted_version_is_422(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        """The issue's new user: a split naming a version that does not exist was accepted."""
        alice = bearer("alice")
        request = body("nys-pkg", "1.0.0")
        request["manifest"]["package"]["deployment"] = {
            "strategy": "canary",
            "canary": {"traffic_split": {"1.0.0": 10, "0.1.0": 90}},
        }
        response = await client.post("/packages", json=request, headers=alice)
        assert response.status_code == 422
        assert "canary" in response.json()["detail"]


class TestResourcesInTheManifest:
    async def test_hostile_values_are_422(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        alice = bearer("alice")
        hostile: list[dict[str, Any]] = [
            {"resources": {"memory_mb": -1}},
            {"resources": {"memory_mb": 4096}},
            {"resources": {"memory_mb": 10**30}},
            {"resources": {"memory_mb": "256"}},
            {"resources": {"memory_mb": 100.5}},
            {"resources": {"cpus": 3}},
            {"resources": {"cpus": 0}},
            {"resources": {"cpus": "half"}},
            {"resources": {"cpus": True}},
            {"resources": {"timeout_s": 301}},
            {"resources": {"timeout_s": -5}},
            {"resources": {"timeout_s": 1e308}},
            {"resources": {"gpus": 1}},
            {"resources": {}},
            {"resources": "big"},
            {"profile": "turbo"},
            {"profile": "compute", "resources": {"memory_mb": 512}},
        ]
        for fn in hostile:
            response = await client.post(
                "/packages", json=body("res-bad", "1.0.0", **fn), headers=alice
            )
            assert response.status_code == 422, (fn, response.text)
            assert response.json()["detail"].startswith("ValidationError: ")
        assert (await client.get("/packages/res-bad", headers=alice)).status_code == 404

    async def test_declared_resources_are_part_of_the_version(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        first = await publish(client, alice, body("res-ok", "1.0.0", profile="compute"))
        same = await publish(client, alice, body("res-ok", "1.0.1", profile="compute"))
        assert same["functions"][0]["status"] == "unchanged"
        limits = {"memory_mb": 512, "cpus": 1, "timeout_s": 60}
        changed = await publish(client, alice, body("res-ok", "1.0.2", resources=limits))
        # The code is the same, but the limits are part of the immutable version.
        assert changed["functions"][0]["status"] == "updated"
        assert changed["functions"][0]["version_id"] != first["functions"][0]["version_id"]
        function = await client.get(f"/functions/{first['functions'][0]['id']}", headers=alice)
        assert function.json()["current"]["resources"] == {
            "memory_mb": 512,
            "cpus": 1.0,
            "timeout_s": 60.0,
        }
        gql = await client.post(
            "/graphql",
            json={
                "query": "query($id: ID!) { package(id: $id) { functions { versions "
                "{ version resources } } } }",
                "variables": {"id": first["package_id"]},
            },
            headers=alice,
        )
        (fn,) = gql.json()["data"]["package"]["functions"]
        assert [v["resources"] for v in fn["versions"]] == [
            {"memory_mb": 256, "cpus": 0.5, "timeout_s": 30},
            {"memory_mb": 512, "cpus": 1.0, "timeout_s": 60.0},
        ]
