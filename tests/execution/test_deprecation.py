"""Contract 11, Deprecation, on execute: the RFC 9745 `Deprecation` header and `warnings` on
every answer for a deprecated version (finished, still queued, pinned or unpinned), and
nothing on a version that is not deprecated."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest

from tests.execution.conftest import Platform
from tests.packages.publishing import small_body

pytestmark = pytest.mark.db

DOOMED = {"deprecated": True, "deprecated_message": "use run2", "removal_version": "2.0.0"}
IO = {"inputs": {"x": {"type": "Float"}}, "outputs": {"y": {"type": "Float"}}}


async def publish(platform: Platform, name: str, version: str, **fn: object) -> dict[str, object]:
    body = small_body(name, version, functions={"run": {"handler": "main:run", **IO, **fn}})
    response = await platform.client.post("/packages", json=body, headers=platform.headers())
    assert response.status_code == 201, response.text
    report: dict[str, object] = response.json()
    return report


class TestDeprecatedExecute:
    async def test_header_and_warning(self, platform: Platform) -> None:
        name = f"dep-{uuid.uuid4().hex[:8]}"
        await publish(platform, name, "1.0.0")
        await publish(platform, name, "1.1.0", **DOOMED)
        listing = await platform.client.get(
            f"/functions/run/versions?package={name}", headers=platform.headers()
        )
        deployed_at = datetime.fromisoformat(listing.json()["versions"][-1]["deployed_at"])

        response = await platform.execute(f"/packages/{name}/functions/run/execute", {"x": 2})
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"y": 2}
        assert response.json()["warnings"] == ["run is deprecated: use run2; removed in 2.0.0"]
        header = response.headers["Deprecation"]
        assert header.startswith("@")
        assert abs(int(header[1:]) - deployed_at.timestamp()) < 2

        queued = await platform.execute(f"/packages/{name}/functions/run/execute", {"x": 3}, 0)
        assert queued.status_code == 202
        assert queued.headers["Deprecation"] == header
        assert queued.json()["warnings"]

        pinned = await platform.execute(f"/packages/{name}/functions/run@1.0.0/execute", {"x": 2})
        assert pinned.status_code == 200
        assert "Deprecation" not in pinned.headers
        assert "warnings" not in pinned.json()

    async def test_through_the_api_prefix_and_graphql(self, platform: Platform) -> None:
        name = f"dep-{uuid.uuid4().hex[:8]}"
        report = await publish(platform, name, "1.0.0", deprecated=True)
        response = await platform.execute(
            f"/api/v1/packages/{name}/functions/run/execute", {"x": 1}
        )
        assert response.status_code == 200, response.text
        assert response.json()["warnings"] == ["run is deprecated"]
        assert response.headers["Deprecation"].startswith("@")
        gql = await platform.client.post(
            "/graphql",
            json={
                "query": "query($id: ID!) { package(id: $id) { functions { versions "
                "{ deprecated deprecatedMessage removalVersion } } } }",
                "variables": {"id": report["package_id"]},
            },
            headers=platform.headers(),
        )
        assert gql.status_code == 200, gql.text
        (function,) = gql.json()["data"]["package"]["functions"]
        assert function["versions"] == [
            {"deprecated": True, "deprecatedMessage": None, "removalVersion": None}
        ]
