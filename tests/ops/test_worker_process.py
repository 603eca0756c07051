"""`calcgraph worker` as a real process against Redis: its own /metrics on
`CALCGRAPH_WORKER_METRICS_PORT`, JSON log lines naming the job, and the API's /metrics counting
the broker's queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.factories import deploy
from tests.ops.conftest import parse_metrics, value
from tests.ops.test_ratelimit import REDIS_URL, _redis_or_skip

pytestmark = pytest.mark.db


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "worker", "--processes", "1", "--threads", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _stop_worker(worker: subprocess.Popen[bytes], prefix: str) -> None:
    """SIGTERM (killed after 30 s), then the Redis keys under the test's prefix removed."""
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


@dataclass
class WorkerSetup:
    platform: Platform
    worker: subprocess.Popen[bytes]
    metrics_url: str
    log_path: Path


@pytest.fixture
async def worker_setup(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[WorkerSetup]:
    _redis_or_skip()
    prefix = f"ops-worker-{uuid.uuid4().hex[:8]}:"
    sandbox = default_sandbox()
    port = _free_port()
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": sandbox,
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        "CALCGRAPH_WORKER_METRICS_PORT": str(port),
        "CALCGRAPH_LOG_LEVEL": "info",
    }
    env.pop("CALCGRAPH_LOG_FORMAT", None)  # stderr is a file: JSON by default
    worker = _start_worker(env, log_path)
    try:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            sandbox,
            redis_url=REDIS_URL,
            redis_key_prefix=prefix,
        ) as platform:
            yield WorkerSetup(platform, worker, f"http://127.0.0.1:{port}/metrics", log_path)
    finally:
        _stop_worker(worker, prefix)
        assert worker.returncode == 0, log_path.read_text()[-4000:]


async def test_worker_process_serves_its_metrics_and_logs_job_ids(
    worker_setup: WorkerSetup,
) -> None:
    platform = worker_setup.platform
    alice = await platform.user("alice")
    deployed = await deploy(platform.database, alice)
    done = await platform.execute(
        f"/functions/{deployed.functions['add']}/execute", {"x": 2, "y": 3}, wait=60
    )
    assert done.status_code == 200, done.text
    job_id = done.json()["job_id"]

    async with httpx.AsyncClient() as client:
        scraped = await client.get(worker_setup.metrics_url)
    assert scraped.status_code == 200
    samples = parse_metrics(scraped.text)
    assert value(samples, "calcgraph_job_runs_total", status="success", error_kind="") == 1
    assert value(samples, "calcgraph_result_cache_stores_total") == 1
    assert value(samples, "calcgraph_warm_pool_starts_total") == 1
    # The worker's registry holds worker series only; HTTP series are the API's.
    assert not [name for name, _ in samples if name.startswith("calcgraph_http_")]

    api = parse_metrics((await platform.client.get("/metrics")).text)
    assert value(api, "calcgraph_broker_queue_length") == 0
    assert value(api, "calcgraph_result_cache_lookups_total", result="miss") >= 1

    lines = [json.loads(line) for line in worker_setup.log_path.read_text().splitlines()]
    ran = [line for line in lines if line.get("job_id") == job_id]
    assert ran, lines
    assert ran[0]["logger"] == "calcgraph.workers.jobs"
    assert ran[0]["status"] == "success"


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid`'s threads (its sandboxes, children, not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_an_idle_worker_sleeps_and_stops_cleanly(worker_setup: WorkerSetup) -> None:
    """Its consumers wait for a doorbell instead of polling Redis: a few seconds with nothing
    to do cost it a sliver of a core (a bound of behaviour, not speed: polling every 5 ms cost
    0.29 of a core), a job sent afterwards still runs, and SIGTERM stops it without a
    CRITICAL line in its log."""
    import asyncio
    import time

    platform, pid = worker_setup.platform, worker_setup.worker.pid
    alice = await platform.user("alice")
    deployed = await deploy(platform.database, alice)
    url = f"/functions/{deployed.functions['add']}/execute"
    first = await platform.execute(url, {"x": 1, "y": 1}, wait=60)
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "success", first.text
    await asyncio.sleep(1.0)  # the job's acknowledgement and the warm pool settle

    # Three windows of 2 s: the quietest one bounds the idle cost. A worker that polls pays
    # in every window; a last piece of the first job's aftermath (a spare sandbox started, a
    # lazy import) on a loaded machine lands in one of them only.
    shares = []
    for _ in range(3):
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(2.0)
        shares.append((_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0))
    assert min(shares) < 0.05, f"an idle worker used {min(shares):.1%} of a core at least {shares}"

    later = await platform.execute(url, {"x": 2, "y": 3}, wait=60)
    assert later.status_code == 200, later.text
    assert later.json()["outputs"] == {"sum": 5}, later.text

    _stop_worker(worker_setup.worker, "unused-prefix:")
    assert worker_setup.worker.returncode == 0
    lines = worker_setup.log_path.read_text().splitlines()
    assert not [line for line in lines if "CRITICAL" in line], lines[-20:]
