"""The Redis path: the API only sends; `calcgraph worker` (a real subprocess) runs the jobs,
stores results in the Redis result cache and notifies the waiting API through pub/sub.

Uses Redis database 11 at 127.0.0.1:6379 (`CALCGRAPH_TEST_REDIS_URL` overrides) and a fresh key
prefix per test, so it never touches another user's keys.
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
from tests.execution.factories import deploy

pytestmark = pytest.mark.db

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")


def _redis_or_skip() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")


def _start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "calcgraph", "worker", "--processes", "1", "--threads", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
async def redis_platform(
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
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
    }
    worker = _start_worker(env)
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


class TestRedisBroker:
    async def test_a_worker_process_runs_jobs_and_the_cache_is_shared(
        self, redis_platform: Platform
    ) -> None:
        platform = redis_platform
        assert not platform.execution.in_process
        assert platform.execution.runtime is None  # this process only sends
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        path = f"/packages/{deployed.package_name}/functions/add/execute"
        first = await platform.execute(path, {"x": 20, "y": 22}, wait=60)
        assert first.status_code == 200, first.text
        assert first.json()["outputs"] == {"sum": 42.0}
        second = (await platform.execute(path, {"x": 20, "y": 22})).json()
        job = (
            await platform.client.get(f"/jobs/{second['job_id']}", headers=platform.headers())
        ).json()
        assert job["cache_hit"] is True
        assert job["outputs"] == {"sum": 42.0}

        queued = await platform.execute(path, {"x": 1, "y": 1}, wait=0)
        assert queued.status_code == 202
        job_id = queued.json()["job_id"]
        for _ in range(400):
            job = (await platform.client.get(f"/jobs/{job_id}", headers=platform.headers())).json()
            if job["status"] == "success":
                break
            await asyncio.sleep(0.05)
        assert job["status"] == "success"
        assert job["outputs"] == {"sum": 2.0}

        failed = (
            await platform.execute(
                f"/packages/{deployed.package_name}/functions/boom/execute", {"x": 1}
            )
        ).json()
        assert failed["status"] == "failed"
        assert failed["error"]["kind"] == "user_error"
