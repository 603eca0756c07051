"""Run control's hostile cases (issue 25) beyond those of test_run_control_api.py:

- a retry policy of 10 attempts of a job that exhausts its memory each time, on every sandbox
  backend that enforces a memory limit (bwrap, docker): the run fails after the tenth attempt,
  the worker survives and its warm pool is not poisoned (a job of the same function version
  afterwards succeeds in that pool, the next one on a warm sandbox of it);
- the same in the production shape: Redis and a separate one-thread `calcgraph worker` process
  (the worker process lives on and runs the function within its memory after);
- a cancel racing 50 concurrent ticks of a wide run that is midway, in process and with Redis
  and a separate `calcgraph worker`: one outcome (the run cancelled once, a single
  `calcgraph.run.cancelled`), consistent node states (no node left pending or running, each
  node at most one job, every job of the run ended), and no tick after it submits anything.

Both on SQLite and PostgreSQL (the `backend` fixture).
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from calcgraph.domain.jobs.models import Job
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.runs.test_run_control_api import (
    LONG,
    TERMINAL,
    _code_runtime,
    _package,
    _start,
    _workflow,
)
from tests.runs.test_run_control_matrix import worker_process
from tests.runs.test_tick_api import _status, _tick, _until
from tests.sandbox.conftest import _make_backend
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

ATTEMPTS = 10
HOARD = textwrap.dedent(
    """
    def hoard(x):
        kept = [b"x" * (16 << 20) for _ in range(int(x))]
        return {"y": float(len(kept))}
    """
)
F = {"type": "Float", "required": True}


@pytest.fixture(params=["bwrap", "docker"])
def limiting_sandbox(request: pytest.FixtureRequest) -> str:
    """A sandbox backend that enforces a function's declared memory (the process backend
    refuses such a job instead: test_resources.py)."""
    found = _make_backend(str(request.param))
    if isinstance(found, str):
        pytest.skip(found)
    return str(request.param)


@pytest.fixture(params=["bwrap", "docker"])
async def limiting_platform(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    """A platform on a sandbox backend that enforces a function's declared memory (the
    process backend refuses such a job instead: test_resources.py)."""
    found = _make_backend(str(request.param))
    if isinstance(found, str):
        pytest.skip(found)
    async with running_platform(
        exec_url, identity_provider, tmp_path, str(request.param), sandbox_timeout_seconds=60
    ) as platform:
        yield platform


async def _hoarding_package(platform: Platform) -> str:
    name = f"oom-{uuid.uuid4().hex[:8]}"
    body = {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": {"name": name, "version": "1.0.0"},
            "functions": {
                # The compute profile: 256 MB, far below the worker's own limit.
                "hoard": {
                    "handler": "main:hoard",
                    "profile": "compute",
                    "inputs": {"x": F},
                    "outputs": {"y": {"type": "Float"}},
                }
            },
        },
        "files": {"main.py": HOARD},
    }
    response = await platform.client.post("/packages", json=body, headers=platform.headers())
    assert response.status_code == 201, response.text
    return name


class TestRetryOfMemoryExhaustion:
    async def test_ten_attempts_that_exhaust_memory_leave_the_pool_healthy(
        self, limiting_platform: Platform
    ) -> None:
        platform = limiting_platform
        runtime = _code_runtime(platform)
        name = await _hoarding_package(platform)
        node = fn("h", f"{name}/hoard", x="x")
        node["retry"] = {
            "max_attempts": ATTEMPTS,
            "initial_interval_s": 0,
            "on": ["out_of_memory"],
        }
        slug = await _workflow(platform, [inp("x"), node])
        # 40 x 16 MiB: past the 256 MB of the compute profile, every attempt.
        run = await _start(platform, slug, {"x": 40.0})
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL, seconds=600)
        assert run["status"] == "failed", run
        assert run["first_failed_node_key"] == "h"
        state = run["node_states"]["h"]
        assert state["status"] == "failed"
        assert state["attempt"] == ATTEMPTS
        assert state["error"]["kind"] == "out_of_memory"
        assert [a["attempt"] for a in state["attempts"]] == list(range(1, ATTEMPTS))
        assert {a["error"]["kind"] for a in state["attempts"]} == {"out_of_memory"}
        job_ids = [a["job_id"] for a in state["attempts"]] + [state["job_id"]]
        assert len(set(job_ids)) == ATTEMPTS
        async with platform.database.read_session() as session:
            rows = (
                await session.execute(
                    select(Job.status, Job.error).where(Job.workflow_run_id == run["id"])
                )
            ).all()
        assert len(rows) == ATTEMPTS
        assert {(status, error["kind"]) for status, error in rows} == {("failed", "out_of_memory")}

        # The worker survived them all and its pool was not poisoned: the same function
        # version within its memory runs in that pool, and the next job takes a warm sandbox.
        assert runtime.running.snapshot() == {}
        hits = runtime.pool.stats.hits
        for x in (2.0, 3.0):
            done = await platform.execute(f"/packages/{name}/functions/hoard/execute", {"x": x})
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "success", done.json()
            assert done.json()["outputs"] == {"y": x}
        assert runtime.pool.stats.hits > hits


async def test_ten_attempts_that_exhaust_memory_in_a_worker_process(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
    limiting_sandbox: str,
) -> None:
    """The same hostile retry policy in the production shape: Redis and a separate `calcgraph
    worker` process of one thread. The run fails after the tenth attempt, each its own job
    ended `out_of_memory`; the worker process is still alive and runs a job of the same
    function within its memory on that one thread."""
    async with worker_process(exec_url, identity_provider, tmp_path, limiting_sandbox) as (
        platform,
        worker,
    ):
        name = await _hoarding_package(platform)
        node = fn("h", f"{name}/hoard", x="x")
        node["retry"] = {"max_attempts": ATTEMPTS, "initial_interval_s": 0, "on": ["out_of_memory"]}
        slug = await _workflow(platform, [inp("x"), node])
        run = await _start(platform, slug, {"x": 40.0})
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL, seconds=600)
        assert run["status"] == "failed", run
        state = run["node_states"]["h"]
        assert (state["attempt"], state["error"]["kind"]) == (ATTEMPTS, "out_of_memory")
        assert [a["attempt"] for a in state["attempts"]] == list(range(1, ATTEMPTS))
        jobs = await _jobs_of(platform, run["id"])
        assert len(jobs) == ATTEMPTS
        assert {(key, status, error["kind"]) for key, status, error in jobs} == {
            ("h", "failed", "out_of_memory")
        }
        assert worker.poll() is None, "the worker process died"
        for x in (2.0, 3.0):
            done = await platform.execute(
                f"/packages/{name}/functions/hoard/execute", {"x": x}, wait=LONG / 3
            )
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "success", done.json()
            assert done.json()["outputs"] == {"y": x}
        assert worker.poll() is None


WIDE = 12
"""Napping branches of the raced run: some running, the rest pending (2 worker threads)."""


async def _wide_run(platform: Platform) -> dict[str, Any]:
    """x -> a (quick) -> n0..n11 (each naps LONG seconds): midway, with `a` done, two branches
    running and the others pending."""
    name = (await _package(platform)).split("|")[0]
    naps = [fn(f"n{i:02d}", f"{name}/nap", x="x") for i in range(WIDE)]
    slug = await _workflow(platform, [inp("x"), fn("a", f"{name}/inc", x="x"), *naps])
    run = await _start(platform, slug, {"x": LONG})
    return await _until(
        platform,
        run["id"],
        lambda r: r["node_states"]["a"]["status"] == "success" and "running" in _status(r).values(),
    )


async def _jobs_of(platform: Platform, run_id: str) -> list[tuple[str | None, str, Any]]:
    async with platform.database.read_session() as session:
        rows = await session.execute(
            select(Job.node_key, Job.status, Job.error).where(Job.workflow_run_id == run_id)
        )
        return [(key, status, error) for key, status, error in rows]


class TestCancelRacingFiftyTicks:
    @pytest.mark.parametrize("shape", ["in-process", "worker"])
    async def test_one_outcome_and_consistent_states(
        self,
        exec_url: str,
        identity_provider: LocalIdentityProvider,
        tmp_path: Path,
        shape: str,
    ) -> None:
        """In process (two worker threads) and with Redis and a one-thread `calcgraph
        worker` process, whose cancel reaches the worker through the database."""
        async with contextlib.AsyncExitStack() as stack:
            if shape == "worker":
                platform, _ = await stack.enter_async_context(
                    worker_process(exec_url, identity_provider, tmp_path, default_sandbox())
                )
            else:
                platform = await stack.enter_async_context(
                    running_platform(
                        exec_url,
                        identity_provider,
                        tmp_path,
                        default_sandbox(),
                        sandbox_timeout_seconds=LONG * 2,
                        job_cancel_check_seconds=0.5,
                    )
                )
            run = await _wide_run(platform)
            run_id = run["id"]
            headers = platform.headers("alice")

            async def tick(index: int) -> tuple[int, dict[str, Any]]:
                params = {"wait": 0.5} if index % 3 == 0 else {}
                response = await platform.client.post(
                    f"/workflow-runs/{run_id}/tick", params=params, headers=headers
                )
                return response.status_code, response.json()

            async def cancel() -> tuple[int, dict[str, Any]]:
                response = await platform.client.post(
                    f"/workflow-runs/{run_id}/cancel", headers=headers
                )
                return response.status_code, response.json()

            # The cancel goes out in the middle of the 50 ticks.
            ticks = [tick(i) for i in range(50)]
            answers = await asyncio.gather(*ticks[:25], cancel(), *ticks[25:])
            cancelled = answers[25]
            ticked = answers[:25] + answers[26:]
            assert cancelled[0] == 200, cancelled
            assert {status for status, _ in ticked} == {200}, ticked
            # Every answer is either the run before the cancel or the cancelled run, never a
            # mix: a cancelled run's nodes are all ended.
            for _, body in [cancelled, *ticked]:
                if body["status"] == "cancelled":
                    assert set(_status(body).values()) <= {"success", "cancelled"}, body
                else:
                    assert body["status"] == "running", body
            final = await _tick(platform, run_id)
            assert final["status"] == "cancelled"
            assert final["completed_at"] is not None
            assert final["revision"] == cancelled[1]["revision"]
            assert _status(final) == {
                "a": "success",
                **{f"n{i:02d}": "cancelled" for i in range(WIDE)},
            }
            # Each node at most one job; the jobs of the run all ended, the stopped ones with
            # kind `cancelled`; nothing submitted after the cancel.
            deadline = time.monotonic() + LONG - 15
            while True:
                jobs = await _jobs_of(platform, run_id)
                if all(status in ("success", "failed") for _, status, _ in jobs):
                    break
                assert time.monotonic() < deadline, jobs
                await asyncio.sleep(0.2)
            per_node = Counter(key for key, _, _ in jobs)
            assert max(per_node.values()) == 1, per_node
            assert per_node["a"] == 1
            for key, status, error in jobs:
                if key != "a":
                    assert (status, error["kind"]) == ("failed", "cancelled"), (key, error)
            with_job = {k for k, s in final["node_states"].items() if s["job_id"] is not None}
            assert with_job == set(per_node)
            await asyncio.sleep(1.0)
            again = await asyncio.gather(*(tick(i) for i in range(10)))
            assert {body["revision"] for _, body in again} == {final["revision"]}
            assert sorted(await _jobs_of(platform, run_id), key=str) == sorted(jobs, key=str)
            events = await platform.client.get(
                "/events", params=[("type", "calcgraph.run.*")], headers=headers
            )
            assert events.status_code == 200, events.text
            ends = [e["type"] for e in events.json()["items"] if e["subject"] == run_id]
            assert ends.count("calcgraph.run.cancelled") == 1, ends
            assert "calcgraph.run.failed" not in ends
            assert "calcgraph.run.completed" not in ends


class TestHostileRequests:
    """No token, another user, bad bodies: the contract's status and detail prefix, never a
    500, and nothing changes."""

    async def test_refusals_change_nothing(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            default_sandbox(),
            sandbox_timeout_seconds=LONG * 2,
            job_cancel_check_seconds=0.5,
        ) as platform:
            name = (await _package(platform)).split("|")[0]
            slug = await _workflow(platform, [inp("x"), fn("i", f"{name}/inc", x="x")])
            done = await _start(platform, slug, {"x": 1.0})
            done = await _until(platform, done["id"], lambda r: r["status"] in TERMINAL)
            job_id = done["node_states"]["i"]["job_id"]
            client, alice = platform.client, platform.headers("alice")
            paths = [
                f"/workflow-runs/{done['id']}/cancel",
                f"/workflow-runs/{done['id']}/rerun",
                f"/jobs/{job_id}/cancel",
            ]
            for path in paths:
                anonymous = await client.post(path, json={})
                assert anonymous.status_code == 401, (path, anonymous.text)
                other = await client.post(path, json={}, headers=platform.headers("bob"))
                assert other.status_code in (403, 404), (path, other.text)
            rerun = f"/workflow-runs/{done['id']}/rerun"
            for body in (
                [],
                "start",
                {"from": 5},
                {"from": "failure", "inputs": "x"},
                {"inputs": {"x": [1, 2]}},
                {"workflow_version": "oldest"},
                {"inputs": {"x": 1.0}, "unknown": True},
            ):
                answer = await client.post(rerun, json=body, headers=alice)
                assert answer.status_code in (400, 422), (body, answer.text)
                assert answer.json()["detail"].split(":")[0] in (
                    "ValidationError",
                    "InvalidRequest",
                ), (body, answer.text)
            garbage = await client.post(
                rerun, content=b"{not json", headers={**alice, "content-type": "application/json"}
            )
            assert garbage.status_code in (400, 422), garbage.text
            for path in paths[::2]:  # both ended: 409 for their owner too
                ended = await client.post(path, headers=alice)
                assert ended.status_code == 409, (path, ended.text)
                assert ended.json()["detail"].startswith("Conflict: ")
            unknown = await client.post("/jobs/no-such-job/cancel", headers=alice)
            assert unknown.status_code == 404
            after = await _tick(platform, done["id"])
            assert (after["status"], after["revision"]) == ("completed", done["revision"])
            runs = (await client.get("/workflow-runs", headers=alice)).json()["items"]
            assert [r for r in runs if r.get("rerun_of") == done["id"]] == []
