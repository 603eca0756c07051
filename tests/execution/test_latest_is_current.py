"""`@latest` on an execute path names the same version as the plain path and the listings.

A pre-release deployment under the auto rule bumps a changed function's PATCH (1.0.0 ->
1.0.1) without becoming the package's latest: the function's current version stays 1.0.0,
and `fn@latest` must run it too, not the highest number.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.execution.conftest import Platform


def _package(name: str, version: str, answer: int) -> dict[str, Any]:
    return {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": {"name": name, "version": version, "versioning_strategy": "auto"},
            "functions": {
                "answer": {
                    "handler": "main:answer",
                    "inputs": {"x": {"type": "Float", "required": True}},
                    "outputs": {"y": {"type": "Float"}},
                }
            },
        },
        "files": {"main.py": f"def answer(x):\n    return {{'y': x + {answer}}}\n"},
        "visibility": "private",
    }


async def test_latest_is_the_current_version_not_the_highest(platform: Platform) -> None:
    await platform.user("alice")
    name = f"latest-{uuid.uuid4().hex[:8]}"
    headers = platform.headers("alice")
    first = await platform.client.post(
        "/packages", json=_package(name, "1.0.0", 1), headers=headers
    )
    assert first.status_code == 201, first.text
    rc = await platform.client.post(
        "/packages", json=_package(name, "1.1.0-rc.1", 100), headers=headers
    )
    assert rc.status_code == 201, rc.text
    versions = {f["name"]: f["version"] for f in rc.json()["functions"]}
    assert versions == {"answer": "1.0.1"}

    async def run(path: str) -> float:
        response = await platform.execute(path, {"x": 1}, wait=30)
        assert response.status_code == 200, response.text
        y: float = response.json()["outputs"]["y"]
        return y

    base = f"/packages/{name}"
    assert await run(f"{base}/functions/answer/execute") == 2.0
    assert await run(f"{base}/functions/answer@latest/execute") == 2.0
    assert await run(f"{base}/functions/answer@1.0.1/execute") == 101.0
    assert await run(f"{base}@1.1.0-rc.1/functions/answer/execute") == 101.0
