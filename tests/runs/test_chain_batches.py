"""Chain batches: a chain worker runs consecutive nodes back to back and records them in one
commit per batch, each node still under its own job row with its own times.

Real workers and sandboxes over a committed temporary database (both databases). Batches are
bounded here by the flush period (`FLUSH_EVERY_SECONDS`, made long or zero) and by a change
of function version, which always ends a batch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

import calcgraph.workers.chains
from calcgraph.domain.jobs.enqueue import Message
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.store.service import job_store_service
from calcgraph.domain.runs.chains.service import Advance, chain_service
from calcgraph.workers.broker import QUEUE
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_chains_api import CODE, FUNCTIONS, _job, _line, _run
from tests.runs.test_tick_api import TERMINAL, _start, _status, _tick, _until, _workflow

pytestmark = pytest.mark.db

FRAGILE = """
import time

def fragile(x):
    if x == 4:
        raise ValueError(f"boom at {x}")
    return {"y": x + 1}

def nap(x):
    if x == 2:
        time.sleep(2.0)
    return {"y": x + 1}
"""


async def _package(platform: Platform) -> str:
    """The chain tests' functions, `fragile` (`inc` but for x = 4, where it fails) and `nap`
    (`inc`, slow for x = 2)."""
    name = f"batches-{uuid.uuid4().hex[:8]}"
    functions = {
        **FUNCTIONS,
        "fragile": {**FUNCTIONS["inc"], "handler": "main:fragile"},
        "nap": {**FUNCTIONS["inc"], "handler": "main:nap"},
    }
    body = small_body(name, "1.0.0", code=CODE + FRAGILE, functions=functions)
    await publish(platform.client, platform.headers("alice"), body)
    return name


async def _settle(platform: Platform) -> None:
    """Wait for the workers to be done with every message, dead-lettered ones included."""

    def join() -> None:
        platform.execution.broker.join(QUEUE, fail_fast=False)
        assert platform.execution.worker is not None
        platform.execution.worker.join()

    await asyncio.to_thread(join)


def _at(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def _count_commits(
    monkeypatch: pytest.MonkeyPatch, fail_on: Callable[[int], bool] = lambda _: False
) -> list[int]:
    """The number of links in each batch the workers record; `fail_on(n)` makes the n-th
    record (from 1) raise before its commit, as a worker dying there would lose it."""
    batches: list[int] = []
    record = chain_service.record

    async def counted(*args: Any, **kwargs: Any) -> Advance:
        batches.append(len(args[2].links))
        if fail_on(len(batches)):
            raise RuntimeError("the worker died before the commit")
        return await record(*args, **kwargs)

    monkeypatch.setattr(chain_service, "record", counted)
    return batches


class TestOneCommitPerBatch:
    async def test_nodes_of_one_batch_keep_their_own_jobs_and_times(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pkg = await _package(platform)
        nodes = _line(pkg, ["inc"] * 6)
        await _run(platform, nodes, 0)  # warm: code staged, a sandbox started
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 3600.0)
        batches = _count_commits(monkeypatch)
        runs = platform.runtime.runs
        done = await _run(platform, nodes, 10)
        assert done["status"] == "completed", done
        assert batches == [6]
        assert platform.runtime.runs == runs + 6
        assert done["terminal_outputs"] == {"n5": {"y": 16.0}}
        states = done["node_states"]
        jobs = [await _job(platform, states[f"n{i}"]["job_id"]) for i in range(6)]
        assert len({job["id"] for job in jobs}) == 6
        for i, job in enumerate(jobs):
            assert (job["node_key"], job["status"], job["cache_hit"]) == (f"n{i}", "success", False)
            assert job["inputs"] == {"x": 10.0 + i}
            assert job["outputs"] == {"y": 11.0 + i} == states[f"n{i}"]["outputs"]
            assert f"inc {10.0 + i}" in job["logs"]
            assert states[f"n{i}"]["attempt"] == 1
            assert job["started_at"] < job["finished_at"]
            assert _at(states[f"n{i}"]["finished_at"]) == _at(job["finished_at"])
            if i > 0:  # the head's node state has the tick's submission time
                assert _at(states[f"n{i}"]["started_at"]) == _at(job["started_at"])
        # The times are the nodes' own, one after the other, not the batch's commit.
        for earlier, later in zip(jobs, jobs[1:], strict=False):
            assert earlier["finished_at"] <= later["started_at"]

    async def test_each_node_commits_when_the_flush_period_is_zero(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 0.0)
        batches = _count_commits(monkeypatch)
        pkg = await _package(platform)
        done = await _run(platform, _line(pkg, ["inc"] * 4), 1)
        assert done["terminal_outputs"] == {"n3": {"y": 5.0}}
        assert batches == [1, 1, 1, 1]

    async def test_a_change_of_function_ends_the_batch(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 3600.0)
        batches = _count_commits(monkeypatch)
        pkg = await _package(platform)
        done = await _run(platform, _line(pkg, ["inc", "inc", "slow", "slow", "inc"]), 1)
        assert done["terminal_outputs"] == {"n4": {"y": 6.0}}
        assert batches == [2, 2, 1]

    async def test_a_failure_mid_batch_records_the_nodes_before_it(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 3600.0)
        batches = _count_commits(monkeypatch)
        pkg = await _package(platform)
        runs = platform.runtime.runs
        failed = await _run(platform, _line(pkg, ["fragile"] * 5), 1)
        assert batches == [4]
        assert platform.runtime.runs == runs + 4
        assert failed["status"] == "failed"
        assert failed["first_failed_node_key"] == "n3"
        assert failed["error_message"] == "node 'n3' failed: user_error: ValueError: boom at 4.0"
        assert _status(failed) == {
            "n0": "success",
            "n1": "success",
            "n2": "success",
            "n3": "failed",
            "n4": "cancelled",
        }
        states = failed["node_states"]
        assert states["n4"]["job_id"] is None
        for i in range(3):
            job = await _job(platform, states[f"n{i}"]["job_id"])
            assert (job["status"], job["outputs"]) == ("success", {"y": 2.0 + i})
        boom = await _job(platform, states["n3"]["job_id"])
        assert boom["status"] == "failed"
        assert boom["error"]["kind"] == "user_error"
        assert boom["error"] == states["n3"]["error"]
        assert states["n2"]["finished_at"] <= boom["started_at"] < boom["finished_at"]

    async def test_a_slow_node_does_not_hold_back_its_batch(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pkg = await _package(platform)
        # Warm first (code staged, a sandbox started), as the other batch tests do: a cold
        # sandbox's start outlasts the flush period, and n0 would be a batch of its own. With
        # an input the run below never gives it, so that none of its nodes is a cache hit.
        await _run(platform, _line(pkg, ["nap"]), 5)
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 0.5)
        batches = _count_commits(monkeypatch)
        slug = await _workflow(platform, _line(pkg, ["nap"] * 3))
        run = await _start(platform, slug, {"x": 0})
        await _tick(platform, run["id"])
        # n2 sleeps 2 s: the batch (n0, n1) is recorded while it runs, n2's job started.
        seen = await _until(
            platform,
            run["id"],
            lambda r: _status(r)["n2"] == "running" or r["status"] in TERMINAL,
        )
        assert seen["status"] == "running"
        assert _status(seen) == {"n0": "success", "n1": "success", "n2": "running"}
        n2 = await _job(platform, seen["node_states"]["n2"]["job_id"])
        assert (n2["status"], n2["finished_at"]) == ("running", None)
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["terminal_outputs"] == {"n2": {"y": 3.0}}
        assert batches == [2, 1]
        n1 = await _job(platform, done["node_states"]["n1"]["job_id"])
        n2 = await _job(platform, done["node_states"]["n2"]["job_id"])
        assert n1["finished_at"] <= n2["started_at"]
        assert (_at(n2["finished_at"]) - _at(n2["started_at"])).total_seconds() >= 2.0


class TestLostBatch:
    async def test_nodes_of_a_lost_batch_run_again_and_committed_ones_do_not(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 3600.0)
        # The first batch (n0, n1) commits and starts n2; the second (n2..n4) is lost.
        batches = _count_commits(monkeypatch, fail_on=lambda n: n == 2)
        pkg = await _package(platform)
        slug = await _workflow(platform, _line(pkg, ["inc", "inc", "slow", "slow", "slow"]))
        run = await _start(platform, slug, {"x": 0})
        runs = platform.runtime.runs
        first = await _tick(platform, run["id"])
        head = first["node_states"]["n0"]["job_id"]
        await _settle(platform)
        assert batches == [2, 3]
        assert platform.runtime.runs == runs + 5
        stalled = await _tick(platform, run["id"])
        assert _status(stalled) == {
            "n0": "success",
            "n1": "success",
            "n2": "running",
            "n3": "pending",
            "n4": "pending",
        }
        n2 = stalled["node_states"]["n2"]["job_id"]
        # A redelivery while n2's job is running (its worker may still be at it) runs nothing.
        platform.execution.send(Message("chains.run", {"job_id": head}))
        await _settle(platform)
        assert platform.runtime.runs == runs + 5
        # Released (as after an infrastructure failure), the chain resumes at n2.
        async with platform.database.write_session() as session:
            lease = (await session.get(Job, n2)).lease  # type: ignore[union-attr]
            assert lease is not None
            assert await job_store_service.release(session, n2, lease)
        platform.execution.send(Message("chains.run", {"job_id": head}))
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["status"] == "completed", done
        assert done["terminal_outputs"] == {"n4": {"y": 5.0}}
        assert batches == [2, 3, 3]
        assert platform.runtime.runs == runs + 5 + 3  # n2..n4 again, n0 and n1 not
        states = done["node_states"]
        assert (states["n0"]["job_id"], states["n2"]["job_id"]) == (head, n2)
        assert {s["attempt"] for s in states.values()} == {1}
        assert (await _job(platform, n2))["outputs"] == {"y": 3.0}

    async def test_an_infrastructure_failure_mid_batch_resumes_at_that_node(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(calcgraph.workers.chains, "FLUSH_EVERY_SECONDS", 3600.0)
        batches = _count_commits(monkeypatch)
        pkg = await _package(platform)
        slug = await _workflow(platform, _line(pkg, ["inc"] * 5))
        run = await _start(platform, slug, {"x": 0})
        runs = platform.runtime.runs
        real_count = platform.runtime.count_run
        failures: list[int] = []

        def flaky_count() -> None:
            # The third node's run fails before its sandbox is called, once.
            if platform.runtime.runs == runs + 2 and not failures:
                failures.append(platform.runtime.runs)
                raise RuntimeError("sandbox host unreachable")
            real_count()

        monkeypatch.setattr(platform.runtime, "count_run", flaky_count)
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert failures == [runs + 2]
        assert done["status"] == "completed", done
        assert done["terminal_outputs"] == {"n4": {"y": 5.0}}
        # n0 and n1 recorded with n2 queued; the retry runs n2..n4 once each.
        assert batches == [2, 3]
        assert platform.runtime.runs == runs + 5
        assert {s["attempt"] for s in done["node_states"].values()} == {1}
        n2 = await _job(platform, done["node_states"]["n2"]["job_id"])
        assert (n2["status"], n2["inputs"], n2["outputs"]) == ("success", {"x": 2.0}, {"y": 3.0})
