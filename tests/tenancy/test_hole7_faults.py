"""Hole 7 of issue 12, faults: a worker killed outright, Redis restarted, jobs still end once.

- The must-show test: PostgreSQL, a Redis server of the test's own (never the shared one) and
  two real `calcgraph worker` processes. 20 jobs of 5 s; one worker is killed with `kill -9`
  mid-run and Redis is restarted (without its data) once. Every job ends `success`, each
  executed to its end once (the handler reports its start and its end to a unix socket of the
  test's own: the root-run process sandbox may write no host folder, but it may connect to a
  socket in one), all within 60 s of the kill; then 50 concurrent ticks still submit each node
  once.
- A Redis restart, and Redis down, during execute and tick: never a 500, `/health` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select

from calcgraph.domain.jobs.models import Job
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, available_sandboxes, running_platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import TERMINAL
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

JOBS = 20
NAP_SECONDS = 5.0
CONCURRENT_TICKS = 50
RECOVERY_SECONDS = 60.0

CODE = """
import os
import socket
import time

def _say(folder, line):
    # The sandbox may write no host folder (run by root, every mount is read-only for it), but
    # connecting to a unix socket needs no write to the filesystem.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.path.join(folder, "executions.sock"))
        sock.sendall(line.encode() + b"\\n")

def nap(tag, folder, seconds):
    me = f"{tag} {os.getpid()}-{time.time_ns()}"
    _say(folder, me + " start")
    time.sleep(seconds)
    _say(folder, me + " end")
    return {"tag": tag}

def inc(x):
    return {"y": x + 1}

def add(a, b):
    return {"y": a + b}
"""
F = {"type": "Float", "required": True}
S = {"type": "String", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "nap": {
        "handler": "main:nap",
        "inputs": {"tag": S, "folder": S, "seconds": F},
        "outputs": {"tag": {"type": "String"}},
    },
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "add": {"handler": "main:add", "inputs": {"a": F, "b": F}, "outputs": OUT},
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DedicatedRedis:
    """A `redis-server` of this test alone, on a free port, without persistence: a restart
    loses every message it held, as a crashed or replaced Redis does."""

    def __init__(self, folder: Path) -> None:
        self.port = _free_port()
        self.folder = folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def dedicated_redis(tmp_path: Path) -> Iterator[DedicatedRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary on this machine")
    server = DedicatedRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _sandbox() -> str:
    # The handler reports to a unix socket in a host folder: the process backend reaches it,
    # as root too (bwrap and docker would need the folder mounted, which is no part of what
    # this test is about).
    if "process" not in available_sandboxes():
        pytest.skip("the process sandbox is not available")
    return "process"


def _worker_env(exec_url: str, redis_url: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": redis_url,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": _sandbox(),
        "CALCGRAPH_SANDBOX_TIMEOUT_SECONDS": "30",
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        "CALCGRAPH_LOG_LEVEL": "info",
        # Short timers so the test sees a hand-over in seconds (defaults: 5 s, 30 s, 5 s).
        "CALCGRAPH_JOB_HEARTBEAT_SECONDS": "1",
        "CALCGRAPH_JOB_HEARTBEAT_TIMEOUT_SECONDS": "5",
        "CALCGRAPH_SWEEPER_INTERVAL_SECONDS": "1",
        "CALCGRAPH_SWEEPER_STALE_SECONDS": "2",
    }


def _start_worker(env: dict[str, str], log_path: Path, threads: int) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "worker", "--processes", "1"]
            + ["--threads", str(threads)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=40)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


class ExecutionLog:
    """A unix socket the handlers report to, `<tag> <execution> start|end` a connection: how
    many executions of each job started and how many ran to their end."""

    def __init__(self, folder: Path) -> None:
        self.lines: list[str] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = folder / "executions.sock"
        self.server.bind(str(path))
        path.chmod(0o777)  # each sandbox runs as a uid of its own
        self.server.listen(64)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed
            with connection:
                connection.settimeout(10)
                data = b""
                with contextlib.suppress(OSError):
                    while chunk := connection.recv(4096):
                        data += chunk
            self.lines.extend(data.decode().splitlines())

    def executions(self, tag: str) -> Counter[str]:
        return Counter(line.split()[2] for line in list(self.lines) if line.split()[0] == tag)

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=10)


@pytest.fixture
def execution_log() -> Iterator[tuple[Path, ExecutionLog]]:
    # World-traversable and outside pytest's 0700 tree: the process backend run by root drops
    # the handler to a uid of its own. Outside /tmp too: as root that backend gives each
    # sandbox a private /tmp (and empty /var/tmp, /dev/shm, /run).
    base = None
    if os.geteuid() == 0:
        base = Path("/var/lib/calcgraph-tests")
        base.mkdir(mode=0o755, exist_ok=True)
        base.chmod(0o755)
    folder = Path(tempfile.mkdtemp(prefix="calcgraph-hole7-", dir=base))
    folder.chmod(0o755)
    log = ExecutionLog(folder)
    try:
        yield folder, log
    finally:
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


async def _publish(platform: Platform) -> str:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    return name


async def _statuses(platform: Platform, job_ids: list[str]) -> dict[str, tuple[str, int]]:
    async with platform.database.read_session() as session:
        rows = await session.execute(
            select(Job.id, Job.status, Job.deliveries).where(Job.id.in_(job_ids))
        )
        return {row[0]: (row[1], row[2]) for row in rows}


async def _wide_workflow(platform: Platform, package: str) -> str:
    """A -> B0..B5 -> D: every tick that sees A finish must submit six nodes at once."""
    branches = [fn(f"B{i}", f"{package}/inc", x="A.y") for i in range(6)]
    nodes = [inp("x"), fn("A", f"{package}/inc", x="x"), *branches]
    nodes.append(fn("D", f"{package}/add", a="B0.y", b="B5.y"))
    slug = f"faults-{uuid.uuid4().hex[:8]}"
    response = await platform.client.post(
        "/workflows",
        json={"slug": slug, "name": slug, "graph": {"nodes": nodes}},
        headers=platform.headers("alice"),
    )
    assert response.status_code == 201, response.text
    return slug


async def _fifty_concurrent_ticks(platform: Platform, package: str) -> dict[str, Any]:
    slug = await _wide_workflow(platform, package)
    headers = platform.headers("alice")
    created = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]

    async def tick(wait: float) -> dict[str, Any]:
        response = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": wait}, headers=headers
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    deadline = time.monotonic() + 60
    while True:
        answers = await asyncio.gather(*(tick(0 if i % 2 else 1) for i in range(CONCURRENT_TICKS)))
        done = [a for a in answers if a["status"] in TERMINAL]
        if done:
            run = done[0]
            break
        assert time.monotonic() < deadline, answers[-1]
    async with platform.database.read_session() as session:
        per_node = dict(
            (
                await session.execute(
                    select(Job.node_key, func.count())
                    .where(Job.workflow_run_id == run_id)
                    .group_by(Job.node_key)
                )
            ).all()
        )
    return {"run": run, "jobs_per_node": per_node}


async def test_hole7_kill_9_and_a_redis_restart_lose_and_duplicate_nothing(
    backend: str,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
    dedicated_redis: DedicatedRedis,
    execution_log: tuple[Path, ExecutionLog],
) -> None:
    if backend != "postgresql":
        pytest.skip("the fault test is PostgreSQL + Redis + worker processes")
    shared_folder, log = execution_log
    prefix = f"hole7-{uuid.uuid4().hex[:8]}:"
    env = _worker_env(exec_url, dedicated_redis.url, prefix, tmp_path)
    workers = [_start_worker(env, tmp_path / f"worker-{i}.log", threads=4) for i in range(2)]
    began = time.monotonic()
    try:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            _sandbox(),
            redis_url=dedicated_redis.url,
            redis_key_prefix=prefix,
            sandbox_timeout_seconds=30,
        ) as platform:
            await platform.user("alice")
            package = await _publish(platform)
            path = f"/packages/{package}/functions/nap/execute"
            job_ids: list[str] = []
            for index in range(JOBS):
                inputs = {"tag": f"job-{index:02d}", "folder": str(shared_folder)}
                response = await platform.execute(path, {**inputs, "seconds": NAP_SECONDS}, wait=0)
                assert response.status_code == 202, response.text
                job_ids.append(response.json()["job_id"])
            tags = {job_id: f"job-{index:02d}" for index, job_id in enumerate(job_ids)}

            # Both workers busy: kill one outright, in the middle of its jobs.
            deadline = time.monotonic() + 60
            while True:
                running = [
                    j
                    for j, (s, _) in (await _statuses(platform, job_ids)).items()
                    if s == "running"
                ]
                if len(running) >= 8:
                    break
                assert time.monotonic() < deadline, f"workers did not start: {running}"
                await asyncio.sleep(0.2)
            await asyncio.sleep(NAP_SECONDS / 2)
            victim = workers[0]
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            killed_at = time.monotonic()
            # ... and Redis goes away and comes back empty, queued messages and all.
            await asyncio.sleep(1.0)
            dedicated_redis.restart()

            while True:
                statuses = await _statuses(platform, job_ids)
                if all(s in ("success", "failed") for s, _ in statuses.values()):
                    break
                if time.monotonic() - killed_at > RECOVERY_SECONDS:
                    break
                await asyncio.sleep(0.5)
            recovered_in = time.monotonic() - killed_at

            executions = {job_id: log.executions(tag) for job_id, tag in tags.items()}
            finished = [j for j, (s, _) in statuses.items() if s == "success"]
            redelivered = [j for j, (_, d) in statuses.items() if d > 1]
            restarted = [j for j, c in executions.items() if c["start"] > 1]
            duplicated = [j for j, c in executions.items() if c["end"] > 1]
            lost = [j for j, (s, _) in statuses.items() if s != "success"]
            print(  # noqa: T201 (the counts the issue asks to see)
                f"\nhole 7: submitted {len(job_ids)}, finished {len(finished)}, "
                f"re-delivered {len(redelivered)} (started again {len(restarted)}), "
                f"duplicated {len(duplicated)}, lost {len(lost)}; all done "
                f"{recovered_in:.1f} s after the kill -9, {time.monotonic() - began:.1f} s "
                f"in all; load average {os.getloadavg()}"
            )
            logs = "\n".join((tmp_path / f"worker-{i}.log").read_text()[-3000:] for i in range(2))
            assert lost == [], (statuses, logs)
            assert duplicated == []
            assert all(c["end"] == 1 for c in executions.values()), executions
            assert recovered_in <= RECOVERY_SECONDS
            # Jobs the dead worker was running went to the other one (started again there).
            assert restarted, executions
            for job_id in job_ids:
                job = (
                    await platform.client.get(f"/jobs/{job_id}", headers=platform.headers())
                ).json()
                assert job["outputs"] == {"tag": tags[job_id]}

            ticks = await _fifty_concurrent_ticks(platform, package)
            run, per_node = ticks["run"], ticks["jobs_per_node"]
            print(  # noqa: T201
                f"{CONCURRENT_TICKS} concurrent ticks: run {run['status']}, jobs per node "
                f"{per_node}; load average {os.getloadavg()}"
            )
            assert run["status"] == "completed", run
            assert per_node == {key: 1 for key in ["A", *(f"B{i}" for i in range(6)), "D"]}
    finally:
        for worker in workers:
            _stop(worker)


@pytest.fixture
async def redis_api(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
    dedicated_redis: DedicatedRedis,
) -> AsyncIterator[Platform]:
    """The API alone against the dedicated Redis (no worker: jobs stay queued)."""
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        _sandbox(),
        redis_url=dedicated_redis.url,
        redis_key_prefix=f"hole7-api-{uuid.uuid4().hex[:8]}:",
    ) as platform:
        yield platform


async def _one_node_run(platform: Platform, package: str) -> str:
    slug = f"faults-{uuid.uuid4().hex[:8]}"
    nodes = [inp("x"), fn("A", f"{package}/inc", x="x")]
    response = await platform.client.post(
        "/workflows",
        json={"slug": slug, "name": slug, "graph": {"nodes": nodes}},
        headers=platform.headers("alice"),
    )
    assert response.status_code == 201, response.text
    created = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=platform.headers("alice")
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _queued_job(platform: Platform, job_id: str) -> None:
    async with platform.database.read_session() as session:
        row = await session.get(Job, job_id)
        assert row is not None
        assert row.status == "queued"


async def test_hole7_redis_restart_and_outage_never_give_500_and_health_says_so(
    redis_api: Platform, dedicated_redis: DedicatedRedis
) -> None:
    platform = redis_api
    await platform.user("alice")
    package = await _publish(platform)
    path = f"/packages/{package}/functions/inc/execute"
    headers = platform.headers("alice")
    # Every client connected once: the pools now hold connections.
    first = await platform.execute(path, {"x": 1}, wait=0.2)
    assert first.status_code == 202, first.text
    health = await platform.client.get("/health")
    assert health.json()["redis"] == "ok"

    # A restart between two requests: the pooled connections are dead, the next use
    # reconnects.
    dedicated_redis.restart()
    again = await platform.execute(path, {"x": 2}, wait=0.2)
    assert again.status_code == 202, again.text
    await _queued_job(platform, again.json()["job_id"])
    run_id = await _one_node_run(platform, package)
    ticked = await platform.client.post(f"/workflow-runs/{run_id}/tick", headers=headers)
    assert ticked.status_code == 200, ticked.text
    assert ticked.json()["node_states"]["A"]["status"] in ("queued", "running")

    # Redis down: the request still gets the contract's answer (the job is queued, the
    # sweeper sends it once Redis is back) and /health says the platform is degraded.
    dedicated_redis.stop()
    try:
        await asyncio.sleep(1.1)  # past /health's one-second memory of the last probe
        health = await platform.client.get("/health")
        assert health.status_code == 200, health.text
        assert health.json()["status"] == "degraded"
        assert health.json()["redis"] == "unreachable"
        scraped = await platform.client.get("/metrics")
        assert scraped.status_code == 200, scraped.text
        began = time.monotonic()
        during = await platform.execute(path, {"x": 3}, wait=0.5)
        assert during.status_code == 202, during.text
        assert during.json()["status"] == "queued"
        await _queued_job(platform, during.json()["job_id"])
        run_id = await _one_node_run(platform, package)
        ticked = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": 0.5}, headers=headers
        )
        assert ticked.status_code == 200, ticked.text
        job_id = ticked.json()["node_states"]["A"]["job_id"]
        assert job_id is not None
        await _queued_job(platform, job_id)
        assert time.monotonic() - began < 15  # answered, not stalled on retries
    finally:
        dedicated_redis.start()
    await asyncio.sleep(1.1)
    health = await platform.client.get("/health")
    assert (health.json()["status"], health.json()["redis"]) == ("ok", "ok")
