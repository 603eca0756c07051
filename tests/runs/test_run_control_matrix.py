"""Every bullet of contract section 10 on every sandbox backend this machine has (process,
bwrap, docker), in both shapes the issue asks for: the in-process worker of `calcgraph serve`,
and Redis with a separate `calcgraph worker` process (the API only sends). On SQLite and
PostgreSQL (the `backend` fixture).

Each shape runs jobs on ONE worker thread, so "the cancelled job's sandbox was killed" is shown
the same way in both: a job sent after the cancel finishes, although the cancelled handler would
sleep for minutes on that only thread (and in process, the runtime no longer runs the job and its
warm slot was discarded).

- cancel a run: 200 `cancelled` with `completed_at`; its running node and the pending node after
  it `cancelled`; the running job `failed` with kind `cancelled`; the pending node never gets a
  job (the chain stops before it); later ticks change nothing; a second cancel 409;
- cancel a job, `running` and `queued` (queued behind a running one on the only thread): both
  `failed`/`cancelled`, the queued one never starts;
- retry policy: a node tried twice, its earlier attempt listed, the run failed at the last;
- re-run from failure with an input override: the succeeded node reused (its job id, no job),
  the failed one run again, the run completed;
- cache refresh on execute and at run creation: never answered from the cache, and stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import select

from calcgraph.domain.jobs.models import Job
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, running_platform
from tests.execution.test_redis import REDIS_URL, _redis_or_skip
from tests.runs.test_run_control_api import (
    LONG,
    TERMINAL,
    _code_runtime,
    _job,
    _package,
    _running_here,
    _start,
    _workflow,
)
from tests.runs.test_run_control_redis import _one_thread
from tests.runs.test_tick_api import _status, _tick, _until
from tests.sandbox.conftest import SELECTED, _make_backend
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

SHAPES = ("in-process", "worker")


@dataclass
class Shaped:
    platform: Platform
    sandbox: str
    shape: str


@contextlib.asynccontextmanager
async def worker_process(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path, sandbox: str
) -> AsyncIterator[tuple[Platform, subprocess.Popen[bytes]]]:
    """The API (sending only) and one `calcgraph worker` process of one thread."""
    _redis_or_skip()
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
            assert platform.execution.runtime is None  # this process only sends
            yield platform, worker
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


@pytest.fixture(
    params=[(sandbox, shape) for sandbox in SELECTED for shape in SHAPES],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
async def shaped(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Shaped]:
    sandbox, shape = request.param
    found = _make_backend(sandbox)
    if isinstance(found, str):
        pytest.skip(found)
    if shape == "worker":
        async with worker_process(exec_url, identity_provider, tmp_path, sandbox) as (platform, _):
            yield Shaped(platform, sandbox, shape)
        return
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        sandbox,
        sandbox_timeout_seconds=LONG * 2,
        job_cancel_check_seconds=0.5,
        inprocess_worker_threads=1,
    ) as platform:
        yield Shaped(platform, sandbox, shape)


async def _jobs_of(platform: Platform, run_id: str) -> dict[str, list[tuple[str, Any]]]:
    """node key -> [(status, error)] of the run's jobs, from the database."""
    async with platform.database.read_session() as session:
        rows = await session.execute(
            select(Job.node_key, Job.status, Job.error).where(Job.workflow_run_id == run_id)
        )
        found: dict[str, list[tuple[str, Any]]] = {}
        for key, status, error in rows:
            found.setdefault(str(key), []).append((status, error))
        return found


async def _until_job(platform: Platform, job_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + LONG / 2
    while (job := await _job(platform, job_id))["status"] != status:
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.05)
    return job


async def _thread_is_free(shaped: Shaped, name: str, x: float) -> None:
    """A job sent now finishes on the only worker thread, long before a cancelled nap would
    have ended: that nap's sandbox was killed and its thread given back."""
    response = await shaped.platform.client.post(
        f"/packages/{name}/functions/inc/execute",
        json={"inputs": {"x": x}},
        params={"wait": LONG / 3},
        headers=shaped.platform.headers("alice"),
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "success", response.json()
    assert response.json()["outputs"] == {"y": x + 1}


def _not_in_this_process(shaped: Shaped, job_id: str) -> None:
    if shaped.shape == "in-process":
        assert job_id not in _code_runtime(shaped.platform).running.snapshot()


async def test_cancel_a_run_and_its_jobs(shaped: Shaped) -> None:
    platform = shaped.platform
    alice = platform.headers("alice")
    name = (await _package(platform)).split("|")[0]
    # n naps; p waits on it (a chain n -> p in the plan): pending while n runs.
    slug = await _workflow(
        platform, [inp("x"), fn("n", f"{name}/nap", x="x"), fn("p", f"{name}/inc", x="n.y")]
    )
    run = await _start(platform, slug, {"x": LONG})
    run = await _until(platform, run["id"], lambda r: r["node_states"]["n"]["status"] == "running")
    assert run["node_states"]["p"]["status"] == "pending"
    job_id = run["node_states"]["n"]["job_id"]
    await _until_job(platform, job_id, "running")
    await asyncio.sleep(1.0)  # inside the handler's sleep
    discarded = None
    if shaped.shape == "in-process":
        await _running_here(platform, job_id)
        discarded = _code_runtime(platform).pool.stats.discarded

    response = await platform.client.post(f"/workflow-runs/{run['id']}/cancel", headers=alice)
    assert response.status_code == 200, response.text
    cancelled = response.json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["completed_at"] is not None
    assert _status(cancelled) == {"n": "cancelled", "p": "cancelled"}
    job = await _job(platform, job_id)
    assert (job["status"], job["error"]["kind"]) == ("failed", "cancelled")
    await _thread_is_free(shaped, name, 1.0)
    _not_in_this_process(shaped, job_id)
    if discarded is not None:
        assert _code_runtime(platform).pool.stats.discarded > discarded
    # Later ticks change nothing; p never got a job; n's job stays as the cancel left it.
    again = await _tick(platform, run["id"])
    assert (again["status"], again["revision"]) == ("cancelled", cancelled["revision"])
    assert _status(again) == {"n": "cancelled", "p": "cancelled"}
    jobs = await _jobs_of(platform, run["id"])
    assert list(jobs) == ["n"]
    assert [(s, e["kind"]) for s, e in jobs["n"]] == [("failed", "cancelled")]
    assert (await _job(platform, job_id))["finished_at"] == job["finished_at"]
    conflict = await platform.client.post(f"/workflow-runs/{run['id']}/cancel", headers=alice)
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["detail"].startswith("Conflict: ")

    # Cancel a job: one running on the only thread, one queued behind it.
    async def nap() -> str:
        sent = await platform.client.post(
            f"/packages/{name}/functions/nap/execute",
            json={"inputs": {"x": LONG + uuid.uuid4().int % 1000}},  # no cache hit
            params={"wait": 0},
            headers=alice,
        )
        assert sent.status_code == 202, sent.text
        return str(sent.json()["job_id"])

    running = await nap()
    await _until_job(platform, running, "running")
    queued = await nap()
    await asyncio.sleep(1.0)
    assert (await _job(platform, queued))["status"] == "queued"
    for job_id in (queued, running):
        denied = await platform.client.post(
            f"/jobs/{job_id}/cancel", headers=platform.headers("bob")
        )
        assert denied.status_code in (403, 404), denied.text
        stopped = await platform.client.post(f"/jobs/{job_id}/cancel", headers=alice)
        assert stopped.status_code == 200, stopped.text
        assert (stopped.json()["status"], stopped.json()["error"]["kind"]) == (
            "failed",
            "cancelled",
        )
    await _thread_is_free(shaped, name, 2.0)
    _not_in_this_process(shaped, running)
    never = await _job(platform, queued)
    assert (never["status"], never["error"]["kind"]) == ("failed", "cancelled")
    assert never["started_at"] is None  # the worker never started it
    for job_id in (queued, running):
        ended = await platform.client.post(f"/jobs/{job_id}/cancel", headers=alice)
        assert ended.status_code == 409, ended.text


async def test_retry_rerun_and_cache_refresh(shaped: Shaped) -> None:
    platform = shaped.platform
    alice = platform.headers("alice")
    name = (await _package(platform)).split("|")[0]
    guard = fn("g", f"{name}/guard", a="a.y", limit="lim")
    guard["retry"] = {"max_attempts": 2, "initial_interval_s": 0, "on": ["user_error"]}
    slug = await _workflow(platform, [inp("x"), inp("lim"), fn("a", f"{name}/inc", x="x"), guard])

    # Retry: g fails twice (user_error is in its `on`), the run fails at the last attempt.
    first = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
    first = await _until(platform, first["id"], lambda r: r["status"] in TERMINAL, seconds=LONG)
    assert first["status"] == "failed"
    assert first["first_failed_node_key"] == "g"
    state = first["node_states"]["g"]
    assert (state["status"], state["attempt"], state["error"]["kind"]) == (
        "failed",
        2,
        "user_error",
    )
    assert [(a["attempt"], a["error"]["kind"]) for a in state["attempts"]] == [(1, "user_error")]
    assert state["attempts"][0]["job_id"] != state["job_id"]
    jobs = await _jobs_of(platform, first["id"])
    assert len(jobs["a"]) == 1
    assert [(s, e["kind"]) for s, e in jobs["g"]] == [("failed", "user_error")] * 2

    # Re-run from failure with a new limit: `a` reused, `g` alone runs, the run completes.
    rerun = await platform.client.post(
        f"/workflow-runs/{first['id']}/rerun", json={"inputs": {"lim": 10.0}}, headers=alice
    )
    assert rerun.status_code == 201, rerun.text
    second = rerun.json()
    assert second["rerun_of"] == first["id"]
    reused = second["node_states"]["a"]
    assert (reused["status"], reused["reused"], reused["outputs"]) == ("success", True, {"y": 2.0})
    assert reused["job_id"] == first["node_states"]["a"]["job_id"]
    second = await _until(platform, second["id"], lambda r: r["status"] in TERMINAL, seconds=LONG)
    assert second["status"] == "completed", second
    assert second["terminal_outputs"] == {"g": {"y": 2.0}}
    assert second["node_states"]["g"]["attempt"] == 1
    assert list(await _jobs_of(platform, second["id"])) == ["g"]  # one job submitted

    # Cache refresh on execute: runs again (a new job, no cache hit), and stores its result.
    async def hit(**params: str) -> bool:
        response = await platform.client.post(
            f"/packages/{name}/functions/inc/execute",
            json={"inputs": {"x": 40.0}},
            params={"wait": LONG / 3, **params},
            headers=alice,
        )
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"y": 41.0}
        return bool((await _job(platform, response.json()["job_id"]))["cache_hit"])

    assert [await hit(), await hit(), await hit(cache="refresh"), await hit()] == [
        False,
        True,
        False,
        True,
    ]

    # ... and at run creation.
    single = await _workflow(platform, [inp("x"), fn("i", f"{name}/inc", x="x")])
    hits = []
    for extra in ({}, {}, {"cache": "refresh"}, {}):
        run = await _start(platform, single, {"x": 70.0}, **extra)
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL, seconds=LONG)
        assert run["status"] == "completed", run
        assert run["terminal_outputs"] == {"i": {"y": 71.0}}
        hits.append((await _job(platform, run["node_states"]["i"]["job_id"]))["cache_hit"])
    assert hits == [False, True, False, True]
