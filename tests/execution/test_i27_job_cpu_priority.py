"""Issue 27, what one user may spend: a job executed through the API runs below the platform's CPU
priority, as `CALCGRAPH_SANDBOX_NICENESS` says, on every sandbox backend and both databases (the
setting reaches the sandbox through the workers' limits, as the other limits do)."""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, quick_sandbox, running_platform

pytestmark = pytest.mark.db

CODE = textwrap.dedent(
    """
    import os

    def niceness(x):
        try:
            os.nice(-5)
            raised = 1.0
        except OSError:
            raised = 0.0
        return {"nice": float(os.nice(0)), "raised": raised}
    """
)
FLOAT = {"type": "Float"}
IO = {"inputs": {"x": FLOAT}, "outputs": {"nice": FLOAT, "raised": FLOAT}}


def _expected(steps: int) -> float:
    return float(min(19, os.getpriority(os.PRIO_PROCESS, 0) + steps))


async def _niceness_of_a_job(platform: Platform) -> dict[str, object]:
    name = f"nice-{uuid.uuid4().hex[:8]}"
    manifest = {
        "kind": "package",
        "version": 1,
        "package": {"name": name, "version": "1.0.0"},
        "functions": {"niceness": {**IO, "handler": "main:niceness"}},
    }
    created = await platform.client.post(
        "/packages", json={"manifest": manifest, "files": {"main.py": CODE}},
        headers=platform.headers(),
    )  # fmt: skip
    assert created.status_code == 201, created.text
    response = await platform.execute(f"/packages/{name}/functions/niceness/execute", {"x": 1})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "success", answer
    outputs: dict[str, object] = answer["outputs"]
    return outputs


async def test_a_job_runs_below_the_platform(any_sandbox_platform: Platform) -> None:
    outputs = await _niceness_of_a_job(any_sandbox_platform)
    assert outputs == {"nice": _expected(10), "raised": 0.0}


async def test_the_setting_reaches_the_jobs(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> None:
    async with running_platform(
        exec_url, identity_provider, tmp_path, quick_sandbox(), sandbox_niceness=3
    ) as platform:
        outputs = await _niceness_of_a_job(platform)
    assert outputs == {"nice": _expected(3), "raised": 0.0}
