"""`calcgraph worker` as a real process against Redis: its own /metrics on
`CALCGRAPH_WORKER_METRICS_PORT`, JSON log lines naming the job, and the API's /metrics counting
the broker's queue."""

from __future__ import annotations

import asyncio
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


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """Send `signum` to one thread `tid` of process `pid` (tgkill(2), x86-64 and arm64)."""
    import ctypes
    import platform

    number = {"x86_64": 234, "aarch64": 131}.get(platform.machine())
    if number is None:
        pytest.skip(f"no tgkill syscall number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}) failed")


def _worker_children(pid: int) -> list[int]:
    """The worker processes a `calcgraph worker --processes N` started (not multiprocessing's
    resource tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            command = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"resource_tracker" not in command:
                found.append(int(child))
    return sorted(found)


def _exited(pid: int, timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_sigterm_taken_by_any_thread_stops_the_worker(
    exec_url: str, tmp_path: Path, processes: int
) -> None:
    """The kernel hands a process's signal to any of its threads that does not block it;
    Python runs the handler on the main thread only when it next runs Python code. A worker
    process whose main thread waited for its stop without end lost a SIGTERM taken by another
    thread and ran on until killed (CI: a worker of `--processes 2` outlived its supervisor's
    30 s). Here the signal is sent to one thread other than the main one, of the worker
    (`--processes 1`) or of one child (`--processes 2`): that process stops, exit code 0."""
    _redis_or_skip()
    await asyncio.to_thread(_signal_one_thread, exec_url, tmp_path, processes)


def _signal_one_thread(exec_url: str, tmp_path: Path, processes: int) -> None:
    import time

    prefix = f"ops-sig-{uuid.uuid4().hex[:8]}:"
    port = _free_port() if processes == 1 else _free_port_pair()
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": default_sandbox(),
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        "CALCGRAPH_WORKER_METRICS_PORT": str(port),
        "CALCGRAPH_LOG_LEVEL": "info",
    }
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "worker", "--processes", str(processes)]
            + ["--threads", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        # Each process serves its metrics once its handlers are set and its workers built.
        deadline = time.monotonic() + 90
        for index in range(processes):
            url = f"http://127.0.0.1:{port + index}/metrics"
            while True:
                assert worker.poll() is None, log_path.read_text()[-4000:]
                assert time.monotonic() < deadline, log_path.read_text()[-4000:]
                try:
                    if httpx.get(url).is_success:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        target = worker.pid if processes == 1 else _worker_children(worker.pid)[0]
        others = sorted(int(t.name) for t in Path(f"/proc/{target}/task").iterdir())
        others.remove(target)
        assert others, "the worker process has no thread besides its main one"
        _tgkill(target, others[-1], signal.SIGTERM)
        assert _exited(target, 30), (
            "a SIGTERM taken by a thread other than the main one did not stop the process: "
            + log_path.read_text()[-2000:]
        )
        if processes == 1:
            assert worker.wait(timeout=5) == 0, log_path.read_text()[-4000:]
    finally:
        _stop_worker(worker, prefix)
    assert worker.returncode == 0, log_path.read_text()[-4000:]


def _free_port_pair() -> int:
    """A port whose next one is free too (process i of `--processes N` serves on port + i)."""
    import socket

    for _ in range(50):
        port = _free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two free ports in a row")
