"""Cancel through Redis: the API only sends, one `calcgraph worker` process with ONE thread runs
the jobs. A cancelled job's sandbox is killed in that process: its one thread is free again,
so a job sent after the cancel finishes although the cancelled handler would sleep for minutes.
And a cancel of a run whose worker was killed (kill -9) mid-job, on every sandbox backend.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.test_redis import REDIS_URL, _redis_or_skip
from tests.runs.test_run_control_api import LONG, TERMINAL, _job, _package, _start, _workflow
from tests.runs.test_tick_api import _status, _until
from tests.sandbox.conftest import SELECTED, _make_backend
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


def _descendants(pid: int) -> set[int]:
    """The processes under `pid` (its sandboxes among them), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _containers_of(pid: int) -> list[str]:
    """The docker sandboxes a worker process started (by their owner label)."""
    import docker

    from calcgraph.workers.sandbox.docker import LABEL, OWNER_LABEL

    client = docker.from_env()
    try:
        owner = f"{socket.gethostname()}:{pid}"
        return [
            c.id
            for c in client.containers.list(all=True, filters={"label": LABEL})
            if c.labels.get(OWNER_LABEL) == owner
        ]
    finally:
        client.close()


@pytest.fixture(params=SELECTED)
async def killable_worker(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[tuple[Platform, dict[str, str], list[subprocess.Popen[bytes]]]]:
    """The API (sending only) and one `calcgraph worker` process on each sandbox backend; the
    test kills and starts workers in the list, every one still running is stopped after."""
    _redis_or_skip()
    sandbox = str(request.param)
    found = _make_backend(sandbox)
    if isinstance(found, str):
        pytest.skip(found)
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": sandbox,
        "CALCGRAPH_SANDBOX_TIMEOUT_SECONDS": str(LONG * 2),
        "CALCGRAPH_JOB_CANCEL_CHECK_SECONDS": "0.5",
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        # Short timers: a running job whose worker died would be handed over in seconds.
        "CALCGRAPH_JOB_HEARTBEAT_SECONDS": "1",
        "CALCGRAPH_JOB_HEARTBEAT_TIMEOUT_SECONDS": "5",
        "CALCGRAPH_SWEEPER_INTERVAL_SECONDS": "1",
        "CALCGRAPH_SWEEPER_STALE_SECONDS": "2",
    }
    workers = [_one_thread(env)]
    try:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            sandbox,
            redis_url=REDIS_URL,
            redis_key_prefix=prefix,
        ) as platform:
            yield platform, env, workers
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.communicate()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()


async def test_cancel_of_a_run_whose_worker_was_killed(
    killable_worker: tuple[Platform, dict[str, str], list[subprocess.Popen[bytes]]],
) -> None:
    """kill -9 of the worker running a job, then a cancel: the run ends cancelled at once
    (nothing waits for the dead worker), and a worker started after it neither runs the job
    again nor moves the run; the dead worker's sandbox does not outlive it (docker's container
    is removed by the next worker of the host)."""
    platform, env, workers = killable_worker
    sandbox = env["CALCGRAPH_SANDBOX"]
    name = (await _package(platform)).split("|")[0]
    slug = await _workflow(platform, [inp("x"), fn("n", f"{name}/nap", x="x")])
    run = await _start(platform, slug, {"x": LONG})
    run = await _until(platform, run["id"], lambda r: r["node_states"]["n"]["status"] == "running")
    job_id = run["node_states"]["n"]["job_id"]
    for _ in range(1200):
        if (await _job(platform, job_id))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    assert (await _job(platform, job_id))["status"] == "running"
    await asyncio.sleep(1.0)  # inside the handler's sleep
    victim = workers[0]
    under = _descendants(victim.pid)
    if sandbox == "docker":  # the engine runs the container, not the worker
        assert _containers_of(victim.pid), "the worker runs no sandbox container"
    else:
        assert under, "the worker runs no sandbox process"
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)  # reaped, and its stderr pipe closed

    response = await asyncio.wait_for(
        platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        ),
        timeout=LONG / 2,
    )
    assert response.status_code == 200, response.text
    cancelled = response.json()
    assert cancelled["status"] == "cancelled"
    assert _status(cancelled) == {"n": "cancelled"}
    job = await _job(platform, job_id)
    assert (job["status"], job["error"]["kind"]) == ("failed", "cancelled")

    # A new worker: past the dead one's heartbeat timeout and a few sweeps, it has taken
    # nothing of the cancelled run, and it works (a job sent now finishes).
    workers.append(_one_thread(env))
    quick = await platform.client.post(
        f"/packages/{name}/functions/inc/execute",
        json={"inputs": {"x": 1.0}},
        params={"wait": LONG / 3},
        headers=platform.headers("alice"),
    )
    assert quick.status_code == 200, quick.text
    assert quick.json()["outputs"] == {"y": 2.0}
    await asyncio.sleep(8.0)
    after = await _job(platform, job_id)
    assert (after["status"], after["error"]["kind"]) == ("failed", "cancelled")
    assert after["finished_at"] == job["finished_at"]
    final = await platform.client.post(
        f"/workflow-runs/{run['id']}/tick", headers=platform.headers("alice")
    )
    assert final.status_code == 200, final.text
    assert final.json()["status"] == "cancelled"
    assert final.json()["revision"] == cancelled["revision"]
    assert _status(final.json()) == {"n": "cancelled"}
    # The killed worker's sandbox is gone: its processes died with it, and a docker
    # container (which the engine keeps running) was removed by the worker started since.
    deadline = time.monotonic() + LONG / 2
    while any(_alive(pid) for pid in under):
        assert time.monotonic() < deadline, [p for p in under if _alive(p)]
        await asyncio.sleep(0.2)
    if sandbox == "docker":
        assert _containers_of(victim.pid) == []


async def test_retry_and_rerun_through_the_worker_process(one_thread_worker: Platform) -> None:
    """The tick decides retries and reuse wherever jobs run: through Redis and a `calcgraph
    worker` process, a node tried 3 times fails the run, and its re-run from failure with a
    new limit runs that node alone and completes."""
    platform = one_thread_worker
    name = (await _package(platform)).split("|")[0]
    guard = fn("g", f"{name}/guard", a="a.y", limit="lim")
    guard["retry"] = {"max_attempts": 3, "initial_interval_s": 0, "on": ["user_error"]}
    slug = await _workflow(platform, [inp("x"), inp("lim"), fn("a", f"{name}/inc", x="x"), guard])
    run = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
    run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL, seconds=LONG)
    assert run["status"] == "failed"
    state = run["node_states"]["g"]
    assert state["attempt"] == 3
    assert [a["error"]["kind"] for a in state["attempts"]] == ["user_error", "user_error"]
    rerun = await platform.client.post(
        f"/workflow-runs/{run['id']}/rerun",
        json={"inputs": {"lim": 10.0}},
        headers=platform.headers("alice"),
    )
    assert rerun.status_code == 201, rerun.text
    second = await _until(
        platform, rerun.json()["id"], lambda r: r["status"] in TERMINAL, seconds=LONG
    )
    assert second["status"] == "completed"
    assert second["node_states"]["a"]["reused"] is True
    assert second["node_states"]["a"]["job_id"] == run["node_states"]["a"]["job_id"]
    assert second["node_states"]["g"]["attempt"] == 1
    assert second["terminal_outputs"] == {"g": {"y": 2.0}}
