"""`executeFunction` and the job queries over GraphQL: the same use case as REST."""

from __future__ import annotations

from typing import Any

import pytest

from tests.execution.conftest import Platform
from tests.execution.factories import deploy

pytestmark = pytest.mark.db

EXECUTE = """
mutation($inputs: JSON!, $functionId: ID, $package: String, $function: String, $wait: Float!) {
  executeFunction(inputs: $inputs, functionId: $functionId, package: $package,
                  function: $function, wait: $wait) {
    id status outputs error cacheHit functionVersionId
  }
}
"""


async def _graphql(platform: Platform, query: str, **variables: Any) -> dict[str, Any]:
    response = await platform.client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=platform.headers()
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


class TestExecuteFunction:
    async def test_by_name_and_version_then_read_back(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        body = await _graphql(
            platform,
            EXECUTE,
            inputs={"length": {"value": 1, "unit": "km"}},
            package=deployed.package_name,
            function="double@1.0.0",
            wait=30,
        )
        job = body["data"]["executeFunction"]
        assert job["status"] == "success", body
        assert job["outputs"] == {"doubled": 2000.0}
        assert job["functionVersionId"] == deployed.versions["double"]
        read = await _graphql(
            platform, "query($id: ID!) { job(id: $id) { status cacheHit outputs } }", id=job["id"]
        )
        assert read["data"]["job"] == {
            "status": "success",
            "cacheHit": False,
            "outputs": job["outputs"],
        }

    async def test_wait_zero_and_input_errors(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        queued = await _graphql(
            platform,
            EXECUTE,
            inputs={"x": 1, "y": 2},
            functionId=deployed.functions["add"],
            wait=0,
        )
        assert queued["data"]["executeFunction"]["status"] in ("queued", "running")
        invalid = await _graphql(
            platform, EXECUTE, inputs={"x": "one"}, functionId=deployed.functions["add"], wait=0
        )
        assert invalid["data"] is None
        assert invalid["errors"][0]["extensions"]["code"] == "ValidationError"
