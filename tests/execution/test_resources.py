"""Contract 11, Resources, on every sandbox backend: a function's declared `resources` or
`profile: compute` narrow its jobs' limits (past the memory: `out_of_memory`, past the time:
`timeout`) on bwrap and docker, and the process backend, which cannot enforce them, refuses
such a job (`sandbox_error` naming the fix) instead of running it under other limits."""

from __future__ import annotations

import textwrap
import uuid
from typing import Any

import pytest

from tests.execution.conftest import Platform

pytestmark = pytest.mark.db

CODE = textwrap.dedent(
    """
    import time

    def hoard(x):
        kept = [b"x" * (16 << 20) for _ in range(int(x))]
        return {"y": float(len(kept))}

    def nap(x):
        time.sleep(x)
        return {"y": x}
    """
)
IO = {"inputs": {"x": {"type": "Float"}}, "outputs": {"y": {"type": "Float"}}}


async def publish(platform: Platform, functions: dict[str, Any]) -> str:
    name = f"res-{uuid.uuid4().hex[:8]}"
    body = {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": {"name": name, "version": "1.0.0"},
            "functions": {key: {**IO, **spec} for key, spec in functions.items()},
        },
        "files": {"main.py": CODE},
    }
    response = await platform.client.post("/packages", json=body, headers=platform.headers())
    assert response.status_code == 201, response.text
    return name


async def error_of(platform: Platform, name: str, function: str, x: float) -> dict[str, Any]:
    response = await platform.execute(f"/packages/{name}/functions/{function}/execute", {"x": x})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


class TestDeclaredResources:
    async def test_memory_and_time_are_enforced_or_refused(
        self, any_sandbox_platform: Platform
    ) -> None:
        platform = any_sandbox_platform
        name = await publish(
            platform,
            {
                "hoard": {"handler": "main:hoard", "profile": "compute"},
                "nap": {"handler": "main:nap", "resources": {"timeout_s": 1}},
                "free": {"handler": "main:hoard"},
            },
        )
        backend = platform.settings.sandbox
        # 20 x 16 MiB: past the compute profile's 256 MB, far below the worker's 2 GB.
        hoarded = await error_of(platform, name, "hoard", 20)
        napped = await error_of(platform, name, "nap", 5)
        if backend == "process":
            for answer in (hoarded, napped):
                assert answer["status"] == "failed"
                assert answer["error"]["kind"] == "sandbox_error"
                assert "cannot enforce" in answer["error"]["message"]
        else:
            assert hoarded["status"] == "failed", hoarded
            assert hoarded["error"]["kind"] == "out_of_memory"
            assert napped["status"] == "failed", napped
            assert napped["error"]["kind"] == "timeout"
        # Within the limits the same functions run; a function declaring none keeps the
        # worker's limits on every backend.
        free = await error_of(platform, name, "free", 20)
        assert free["status"] == "success", free
        if backend != "process":
            small = await error_of(platform, name, "hoard", 2)
            assert small["status"] == "success", small
