"""Cancel through Redis: the API only sends, one `calcgraph worker` process with ONE thread runs
the jobs. A cancelled job's sandbox is killed in that process: its one thread is free again,
so a job sent after the cancel finishes although the cancelled handler would sleep for minutes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.test_redis import REDIS_URL, _redis_or_skip
from tests.runs.test_run_control_api import LONG, _job, _package, _start, _workflow
from tests.runs.test_tick_api import _status, _until
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


def _one_thread(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "calcgraph", "worker", "--processes", "1", "--threads", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
async def one_thread_worker(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    _redis_or_skip()
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    sandbox = default_sandbox()
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": sandbox,
        "CALCGRAPH_SANDBOX_TIMEOUT_SECONDS": str(LONG * 2),
        "CALCGRAPH_JOB_CANCEL_CHECK_SECONDS": "0.5",
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
    }
    worker = _one_thread(env)
    try:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            sandbox,
            redis_url=REDIS_URL,
            redis_key_prefix=prefix,
        ) as platform:
            yield platform
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            _, stderr = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, stderr = worker.communicate()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
        assert worker.returncode == 0, stderr.decode()[-4000:]


async def test_cancel_kills_the_sandbox_in_the_worker_process(
    one_thread_worker: Platform,
) -> None:
    platform = one_thread_worker
    assert platform.execution.runtime is None  # this process only sends
    name = (await _package(platform)).split("|")[0]
    slug = await _workflow(platform, [inp("x"), fn("n", f"{name}/nap", x="x")])
    run = await _start(platform, slug, {"x": LONG})
    run = await _until(platform, run["id"], lambda r: r["node_states"]["n"]["status"] == "running")
    job_id = run["node_states"]["n"]["job_id"]
    # Claimed by the worker, and given a moment to be inside the handler's sleep.
    for _ in range(1200):
        if (await _job(platform, job_id))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    assert (await _job(platform, job_id))["status"] == "running"
    await asyncio.sleep(1.0)
    response = await platform.client.post(
        f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
    )
    assert response.status_code == 200, response.text
    assert _status(response.json()) == {"n": "cancelled"}
    assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
    # The worker's only thread is free again well before the nap would end.
    quick = await platform.client.post(
        f"/packages/{name}/functions/inc/execute",
        json={"inputs": {"x": 1.0}},
        params={"wait": LONG / 3},
        headers=platform.headers("alice"),
    )
    assert quick.status_code == 200, quick.text
    assert quick.json()["outputs"] == {"y": 2.0}
