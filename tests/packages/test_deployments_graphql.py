"""Contract 11 through GraphQL on both databases: the same use cases as REST (deployment
state, promote, roll back, a version in detail, the interface diff), under the same rules."""

from __future__ import annotations

from typing import Any

import httpx

from tests.packages.publishing import Bearer, publish
from tests.packages.test_deployments_api import body


async def gql(
    client: httpx.AsyncClient, headers: dict[str, str], query: str, **variables: Any
) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


STATE = "current candidate state strategy history { version action reason }"


class TestDeploymentFields:
    async def test_promote_rollback_and_reads(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice, bob = bearer("alice"), bearer("bob")
        await publish(client, alice, body("gq-bg", "1.0.0", "blue-green", visibility="public"))
        await publish(client, alice, body("gq-bg", "2.0.0", "blue-green"))
        state = await gql(
            client,
            alice,
            f"query($p: String!) {{ packageDeployment(package: $p) {{ {STATE} }} }}",
            p="gq-bg",
        )
        assert state["data"]["packageDeployment"]["state"] == "awaiting_promotion"
        promote = (
            "mutation($p: String!, $v: String!) { promotePackageVersion(package: $p, version: $v) "
            f"{{ {STATE} }} }}"
        )
        denied = await gql(client, bob, promote, p="gq-bg", v="2.0.0")
        assert denied["errors"][0]["extensions"]["code"] == "PermissionDenied"
        done = await gql(client, alice, promote, p="gq-bg", v="2.0.0")
        assert done["data"]["promotePackageVersion"]["current"] == "2.0.0"
        rollback = f"mutation($p: String!) {{ rollbackPackage(package: $p) {{ {STATE} }} }}"
        back = await gql(client, alice, rollback, p="gq-bg")
        assert back["data"]["rollbackPackage"]["current"] == "1.0.0"
        detail = await gql(
            client,
            alice,
            'query($p: String!) { packageVersion(package: $p, version: "2.0.0") '
            "{ version isLatest functions } }",
            p="gq-bg",
        )
        version = detail["data"]["packageVersion"]
        assert (version["version"], version["isLatest"]) == ("2.0.0", False)
        assert version["functions"][0]["name"] == "run"
        diff = await gql(
            client,
            alice,
            'query($p: String!) { packageDiff(package: $p, fromVersion: "1.0.0", '
            'toVersion: "2.0.0") { fromVersion toVersion changes } }',
            p="gq-bg",
        )
        assert diff["data"]["packageDiff"]["changes"] == []
        anonymous = await client.post(
            "/graphql", json={"query": '{ packageDeployment(package: "gq-bg") { current } }'}
        )
        assert anonymous.json()["errors"][0]["extensions"]["code"] == "Unauthenticated"


class TestCanaryFields:
    async def test_the_canary_and_who_may_decide_it(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice, bob = bearer("alice"), bearer("bob")
        admin = bearer("root", roles=["admin", "user"])
        await publish(client, alice, body("gq-cn", "1.0.0", visibility="public"))
        request = body("gq-cn", "2.0.0")
        request["manifest"]["package"]["deployment"] = {
            "strategy": "canary",
            "canary": {
                "traffic_split": {"1.0.0": 80, "2.0.0": 20},
                "success_criteria": {"error_rate_max": "1%", "latency_p95_max": 250},
            },
        }
        await publish(client, alice, request)
        query = (
            "query($p: String!) { packageDeployment(package: $p) { state candidate "
            "trafficSplit observed criteria startedAt endsAt viewerMayDecide } }"
        )
        mine = (await gql(client, alice, query, p="gq-cn"))["data"]["packageDeployment"]
        assert (mine["state"], mine["candidate"]) == ("canary", "2.0.0")
        assert mine["trafficSplit"] == {"1.0.0": 80, "2.0.0": 20}
        assert mine["criteria"] == {"error_rate_max": 0.01, "latency_p95_max_ms": 250}
        assert mine["observed"]["jobs"] == 0
        assert mine["viewerMayDecide"] is True
        theirs = (await gql(client, bob, query, p="gq-cn"))["data"]["packageDeployment"]
        assert theirs["viewerMayDecide"] is False
        assert theirs["state"] == "canary"
        roots = (await gql(client, admin, query, p="gq-cn"))["data"]["packageDeployment"]
        assert roots["viewerMayDecide"] is True
        promote = (
            "mutation($p: String!, $v: String!) { promotePackageVersion(package: $p, version: $v) "
            "{ state current } }"
        )
        denied = await gql(client, bob, promote, p="gq-cn", v="2.0.0")
        assert denied["errors"][0]["extensions"]["code"] == "PermissionDenied"
        done = await gql(client, alice, promote, p="gq-cn", v="2.0.0")
        assert done["data"]["promotePackageVersion"] == {"state": "stable", "current": "2.0.0"}
