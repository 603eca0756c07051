"""Cancel kills the sandbox on every sandbox backend this machine has (bwrap, docker, process):
a run's node sleeps for minutes, with the sandbox's own timeout beyond that; after the cancel
the in-process worker no longer runs it, and its warm slot is discarded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, running_platform
from tests.runs.test_run_control_api import LONG, _code_runtime, _gone, _job, _napping_run
from tests.runs.test_tick_api import _status
from tests.sandbox.conftest import SELECTED, _make_backend

pytestmark = pytest.mark.db


@pytest.fixture(params=SELECTED)
async def backend_platform(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    found = _make_backend(str(request.param))
    if isinstance(found, str):
        pytest.skip(found)
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        str(request.param),
        sandbox_timeout_seconds=LONG * 2,
        job_cancel_check_seconds=0.5,
    ) as platform:
        yield platform


async def test_cancel_kills_the_sandbox(backend_platform: Platform) -> None:
    platform = backend_platform
    run, job_id = await _napping_run(platform)
    pool = _code_runtime(platform).pool
    discarded = pool.stats.discarded
    response = await platform.client.post(
        f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
    )
    assert response.status_code == 200, response.text
    assert _status(response.json()) == {"n": "cancelled"}
    await _gone(platform, job_id)
    assert pool.stats.discarded > discarded
    assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
