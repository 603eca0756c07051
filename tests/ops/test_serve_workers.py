"""`calcgraph serve --workers N`: N processes behind one port sharing what must be shared
(database, Redis broker, notifier, result cache, rate limits) and ticking one run in turns;
refused without Redis, where each process would keep its own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from calcgraph.serving.ratelimit import SYNC_SECONDS
from calcgraph.serving.starting import APPLICATION_READY
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import default_sandbox, exec_url, quick_sandbox  # noqa: F401
from tests.ops.test_ratelimit import REDIS_URL, _redis_or_skip
from tests.ops.test_worker_process import _free_port, _start_worker, _stop_worker
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS, TERMINAL
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db
BURST = 30
STARTING = 60.0


@contextlib.contextmanager
def _serve(env: dict[str, str], port: int, log_path: Path) -> Iterator[str]:
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            # Both processes listen and have their application (a process answers /health
            # while it imports it): the rate-limit burst below must not wait for a start.
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health", timeout=2).status_code == 200 and _ready(log_path):
                    break
            time.sleep(0.1)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _ready(log_path: Path) -> bool:
    ready = APPLICATION_READY.split(",")[0]
    return len(_records(log_path, lambda r: str(r.get("message")).startswith(ready))) == 2


def _records(log_path: Path, keep: Callable[[dict[str, Any]], bool]) -> Counter[int]:
    """How many logged records of each process `keep` keeps (JSON log lines)."""
    found: Counter[int] = Counter()
    # Only whole lines: the processes are still writing, and the last line may be half there.
    for line in log_path.read_text().splitlines(keepends=True):
        if line.startswith("{") and line.endswith("\n"):
            record = json.loads(line)
            if keep(record):
                found[record["process"]] += 1
    return found


def _processes(log_path: Path, path: str) -> Counter[int]:
    """Which process answered each logged request to `path` (access log lines)."""
    return _records(
        log_path,
        lambda r: r.get("logger") == "calcgraph.access" and f" {path} " in r["message"],
    )


def test_two_processes_share_the_load_and_the_state(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> None:
    _redis_or_skip()
    prefix = f"serve-workers-{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_OIDC_ISSUER": identity_provider.issuer,
        "CALCGRAPH_SANDBOX": quick_sandbox(),
        "CALCGRAPH_LOG_LEVEL": "info",
        "CALCGRAPH_LOG_FORMAT": "json",
        # One token a minute: none comes back during the burst, even on a loaded machine.
        "CALCGRAPH_RATE_LIMIT_PER_MINUTE": "1",
        "CALCGRAPH_RATE_LIMIT_BURST": str(BURST),
    }
    log_path = tmp_path / "serve.log"
    slug = f"org-{uuid.uuid4().hex[:8]}"
    try:
        # A process answers /health while it imports the application; a request waits for
        # that (seconds on a loaded machine), hence the long timeouts.
        with (
            _serve(env, _free_port(), log_path) as base,
            httpx.Client(base_url=base, timeout=STARTING) as http,
        ):
            alice = identity_provider.headers("alice")
            created = http.post("/organizations", json={"slug": slug, "name": "W"}, headers=alice)
            assert created.status_code == 201, created.text
            # New connections each time: uvicorn's processes take turns accepting them.
            answers = [
                httpx.get(f"{base}/organizations/{slug}", headers=alice, timeout=STARTING).json()
                for _ in range(BURST - 2)
            ]
            for _ in range(40):
                assert httpx.get(f"{base}/health", timeout=STARTING).status_code == 200
            # One bucket for bob in Redis, whichever process answers; each process answers from
            # its own and syncs them through Redis once a second, so within that second both
            # may let bob through (at most a burst each), and after it neither does.
            bob = identity_provider.headers("bob")
            statuses = Counter(
                httpx.get(f"{base}/workflows", headers=bob, timeout=STARTING).status_code
                for _ in range(BURST + 15)
            )
            time.sleep(3 * SYNC_SECONDS)  # both processes have synced
            after_sync = Counter(
                httpx.get(f"{base}/workflows", headers=bob, timeout=STARTING).status_code
                for _ in range(10)
            )
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
    # The organization made through one process is the same through both.
    assert all(a == answers[0] for a in answers)
    assert answers[0]["slug"] == slug
    assert [m["username"] for m in answers[0]["members"]] == ["alice"]
    by_process = _processes(log_path, f"/organizations/{slug}")
    assert len(by_process) == 2, by_process
    assert len(_processes(log_path, "/health")) == 2
    assert BURST <= statuses[200] <= 2 * BURST, statuses
    assert set(statuses) <= {200, 429}, statuses
    assert after_sync == {429: 10}, after_sync
    assert len(_processes(log_path, "/workflows")) == 2


def test_more_than_one_process_without_redis_is_refused(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'refused.db'}",
        "CALCGRAPH_SANDBOX": quick_sandbox(),
    }
    env.pop("CALCGRAPH_REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "calcgraph", "serve", "--port", "1", "--workers", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--workers 2 needs CALCGRAPH_REDIS_URL" in done.stderr
    assert not (tmp_path / "refused.db").exists()  # refused before migrating anything


async def test_two_processes_tick_one_run_to_its_end(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> None:
    """Every tick on a new connection, so both processes tick the run in turns while one
    `calcgraph worker` runs its jobs: the run completes with each node run once, and once it
    has ended both processes answer its end (neither keeps a state of its own that went
    stale)."""
    _redis_or_skip()
    prefix = f"serve-ticks-{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_OIDC_ISSUER": identity_provider.issuer,
        "CALCGRAPH_SANDBOX": default_sandbox(),
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        "CALCGRAPH_LOG_LEVEL": "info",
        "CALCGRAPH_LOG_FORMAT": "json",
        "CALCGRAPH_RATE_LIMIT_PER_MINUTE": "100000",
        "CALCGRAPH_RATE_LIMIT_BURST": "100000",
    }
    log_path = tmp_path / "serve.log"
    worker = _start_worker(env, tmp_path / "worker.log")
    alice = identity_provider.headers("alice")
    fresh = httpx.Limits(max_keepalive_connections=0)  # uvicorn's processes take turns
    try:
        with _serve(env, _free_port(), log_path) as base:
            async with httpx.AsyncClient(
                base_url=base, timeout=STARTING, limits=fresh, headers=alice
            ) as http:
                package = f"ticks-{uuid.uuid4().hex[:8]}"
                await publish(
                    http, alice, small_body(package, "1.0.0", code=CODE, functions=FUNCTIONS)
                )
                slug = f"wf-{uuid.uuid4().hex[:8]}"
                nodes = [
                    inp("x"),
                    fn("A", f"{package}/inc", x="x"),
                    fn("B", f"{package}/inc", x="A.y"),
                    fn("C", f"{package}/inc", x="A.y"),
                    fn("D", f"{package}/add", a="B.y", b="C.y"),
                ]
                body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
                assert (await http.post("/workflows", json=body)).status_code == 201
                created = await http.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}})
                assert created.status_code == 201, created.text
                run_id = created.json()["id"]
                tick = f"/workflow-runs/{run_id}/tick"
                revisions = []
                for _ in range(60):
                    answer = await http.post(tick, params={"wait": 5})
                    assert answer.status_code == 200, answer.text
                    run = answer.json()
                    revisions.append(run["revision"])
                    if run["status"] in TERMINAL:
                        break
                assert run["status"] == "completed", run
                assert run["terminal_outputs"] == {"D": {"y": 6.0}}
                assert revisions == sorted(revisions)
                ends = [(await http.post(tick)).json() for _ in range(20)]
                jobs = (await http.get("/jobs", params={"limit": 100})).json()["items"]
    finally:
        _stop_worker(worker, prefix)
    assert {(r["status"], r["revision"]) for r in ends} == {("completed", run["revision"])}
    assert {s["status"] for s in ends[-1]["node_states"].values()} == {"success"}
    mine = sorted(j["node_key"] for j in jobs if j["workflow_run_id"] == run_id)
    assert mine == ["A", "B", "C", "D"]
    assert len(_processes(log_path, tick)) == 2
