"""Contract 11, which version an unpinned call gets: rolling and blue-green through HTTP on
both databases; the deployment state and history; promote and roll back by those allowed."""

from __future__ import annotations

from typing import Any

import httpx

from tests.packages.publishing import Bearer, publish, small_body

ADMIN = ("admin", "user")


def body(name: str, version: str, strategy: str | None = None, **extra: Any) -> dict[str, Any]:
    request = small_body(name, version, code=f"def run(x):\n    return {{'y': {version[0]}}}\n")
    if strategy is not None:
        request["manifest"]["package"]["deployment"] = {"strategy": strategy}
    request.update(extra)
    return request


async def unpinned_version(client: httpx.AsyncClient, headers: dict[str, str], name: str) -> str:
    """The function version an unpinned call runs (the job is left queued: no workers here)."""
    response = await client.post(
        f"/packages/{name}/functions/run/execute",
        params={"wait": 0},
        json={"inputs": {"x": 1}},
        headers=headers,
    )
    assert response.status_code == 202, response.text
    job = await client.get(f"/jobs/{response.json()['job_id']}", headers=headers)
    version_id: str = job.json()["function_version_id"]
    return version_id


def ids(report: dict[str, Any]) -> str:
    version_id: str = report["functions"][0]["version_id"]
    return version_id


class TestRolling:
    async def test_each_deployment_is_current_at_once(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        first = await publish(client, alice, body("roll-pkg", "1.0.0"))
        second = await publish(client, alice, body("roll-pkg", "2.0.0"))
        assert await unpinned_version(client, alice, "roll-pkg") == ids(second)
        state = await client.get(f"/packages/{first['package_id']}/deployment", headers=alice)
        assert state.status_code == 200, state.text
        answer = state.json()
        assert answer["strategy"] == "rolling"
        assert answer["state"] == "stable"
        assert answer["current"] == "2.0.0"
        assert answer["candidate"] is None
        assert [(h["version"], h["action"]) for h in answer["history"]] == [
            ("1.0.0", "deployed"),
            ("1.0.0", "promoted"),
            ("2.0.0", "deployed"),
            ("2.0.0", "promoted"),
        ]


class TestBlueGreen:
    async def test_hosted_off_until_promoted_then_rolled_back(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        first = await publish(client, alice, body("bg-pkg", "1.0.0", "blue-green"))
        pid = first["package_id"]
        # The first deployment has nothing to stay behind: current at once.
        assert await unpinned_version(client, alice, "bg-pkg") == ids(first)
        second = await publish(client, alice, body("bg-pkg", "2.0.0", "blue-green"))
        assert await unpinned_version(client, alice, "bg-pkg") == ids(first)
        pinned = await client.post(
            "/packages/bg-pkg@2.0.0/functions/run/execute",
            params={"wait": 0},
            json={"inputs": {"x": 1}},
            headers=alice,
        )
        assert pinned.status_code == 202
        state = (await client.get(f"/packages/{pid}/deployment", headers=alice)).json()
        assert (state["strategy"], state["state"]) == ("blue-green", "awaiting_promotion")
        assert (state["current"], state["candidate"]) == ("1.0.0", "2.0.0")
        package = await client.get(f"/packages/{pid}", headers=alice)
        assert package.json()["current_version"] == "1.0.0"

        promoted = await client.post(f"/packages/{pid}/versions/2.0.0/promote", headers=alice)
        assert promoted.status_code == 200, promoted.text
        assert (promoted.json()["current"], promoted.json()["state"]) == ("2.0.0", "stable")
        assert await unpinned_version(client, alice, "bg-pkg") == ids(second)
        again = await client.post(f"/packages/{pid}/versions/2.0.0/promote", headers=alice)
        assert again.status_code == 409

        rolled = await client.post(f"/packages/{pid}/rollback", headers=alice)
        assert rolled.status_code == 200, rolled.text
        assert rolled.json()["current"] == "1.0.0"
        assert rolled.json()["history"][-1]["action"] == "rolled_back"
        assert "from 2.0.0" in rolled.json()["history"][-1]["reason"]
        assert await unpinned_version(client, alice, "bg-pkg") == ids(first)
        # A workflow saved now resolves its unpinned node to the current version.
        assert (await client.get(f"/packages/{pid}", headers=alice)).json()[
            "current_version"
        ] == "1.0.0"
        # Contract 9: each change of the current version is an event about the package.
        events = await client.get(
            "/events",
            params={"type": "calcgraph.deployment.*", "subject": pid},
            headers=alice,
        )
        assert events.status_code == 200, events.text
        assert [
            (e["type"], e["data"]["version"], e["data"]["previous"]) for e in events.json()["items"]
        ] == [
            ("calcgraph.deployment.promoted", "2.0.0", "1.0.0"),
            ("calcgraph.deployment.rolled_back", "1.0.0", "2.0.0"),
        ]
        assert events.json()["items"][0]["data"]["package"] == "bg-pkg"

    async def test_nothing_to_roll_back_to_is_409(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        report = await publish(client, alice, body("bg-one", "1.0.0", "blue-green"))
        response = await client.post(f"/packages/{report['package_id']}/rollback", headers=alice)
        assert response.status_code == 409
        assert response.json()["detail"].startswith("Conflict: ")

    async def test_unknown_version_is_404(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        alice = bearer("alice")
        report = await publish(client, alice, body("bg-404", "1.0.0", "blue-green"))
        pid = report["package_id"]
        for version in ("9.9.9", "x" * 300, "1.0.0%00"):
            response = await client.post(
                f"/packages/{pid}/versions/{version}/promote", headers=alice
            )
            assert response.status_code == 404, (version, response.text)


class TestWhoMayPromote:
    async def test_owner_org_owner_admin_yes_others_no(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice, bob, carol = bearer("alice"), bearer("bob"), bearer("carol")
        for headers in (alice, bob):
            await client.get("/auth/me", headers=headers)  # provisioned
        created = await client.post(
            "/organizations", json={"slug": "bg-org", "name": "BG"}, headers=carol
        )
        assert created.status_code == 201, created.text
        added = await client.post(
            "/organizations/bg-org/members",
            json={"username": "alice", "role": "member"},
            headers=carol,
        )
        assert added.status_code == 201, added.text
        first = await publish(
            client,
            alice,
            body("bg-perm", "1.0.0", "blue-green", visibility="public", organization="bg-org"),
        )
        pid = first["package_id"]
        await publish(client, alice, body("bg-perm", "2.0.0", "blue-green"))
        # Bob sees the public package and its deployment, but may not change it.
        assert (await client.get(f"/packages/{pid}/deployment", headers=bob)).status_code == 200
        for path in (f"/packages/{pid}/versions/2.0.0/promote", f"/packages/{pid}/rollback"):
            denied = await client.post(path, headers=bob)
            assert denied.status_code == 403, denied.text
            assert denied.json()["detail"].startswith("PermissionDenied: ")
            assert (await client.post(path)).status_code == 401
        state = (await client.get(f"/packages/{pid}/deployment", headers=bob)).json()
        assert state["current"] == "1.0.0"
        # The organization's owner may, and so may an admin.
        ok = await client.post(f"/packages/{pid}/versions/2.0.0/promote", headers=carol)
        assert ok.status_code == 200, ok.text
        admin = bearer("root", roles=list(ADMIN))
        back = await client.post(f"/packages/{pid}/rollback", headers=admin)
        assert back.status_code == 200, back.text
        assert back.json()["current"] == "1.0.0"

    async def test_a_hidden_package_is_403_on_every_route(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        report = await publish(client, bearer("alice"), body("bg-hidden", "1.0.0"))
        pid = report["package_id"]
        bob = bearer("bob")
        assert (await client.get(f"/packages/{pid}/deployment", headers=bob)).status_code == 403
        promote = await client.post(f"/packages/{pid}/versions/1.0.0/promote", headers=bob)
        assert promote.status_code == 403
        assert (await client.post(f"/packages/{pid}/rollback", headers=bob)).status_code == 403
