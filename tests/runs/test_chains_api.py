"""Chain execution end to end: a chain of the frozen plan runs as one worker job, each node
under its own job row, with the same node states, failures and outputs as node execution.

Real workers and sandboxes over a committed temporary database (both databases); runs are
driven by long-poll ticks as a client drives them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from calcgraph.domain.jobs.enqueue import Message
from calcgraph.workers.broker import QUEUE
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, available_sandboxes, running_platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import TERMINAL, _start, _status, _tick, _until, _workflow
from tests.workflows.graphs import ex, fn, inp

pytestmark = pytest.mark.db

CODE = """
import time

def inc(x):
    print(f"inc {x}")
    return {"y": x + 1}

def add(a, b):
    return {"y": a + b}

def boom(x):
    raise ValueError(f"boom at {x}")

def slow(x):
    time.sleep(0.3)
    return {"y": x + 1}
"""
F = {"type": "Float", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "add": {"handler": "main:add", "inputs": {"a": F, "b": F}, "outputs": OUT},
    "boom": {"handler": "main:boom", "inputs": {"x": F}, "outputs": OUT},
    "slow": {"handler": "main:slow", "inputs": {"x": F}, "outputs": OUT},
}
MODES = ("chain", "node")


async def _package(platform: Platform) -> str:
    name = f"chains-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    return name


def _line(pkg: str, functions: list[str]) -> list[dict[str, Any]]:
    """x -> n0 -> n1 -> ...: one chain of the plan."""
    nodes = [inp("x"), fn("n0", f"{pkg}/{functions[0]}", x="x")]
    for i, name in enumerate(functions[1:], start=1):
        nodes.append(fn(f"n{i}", f"{pkg}/{name}", x=f"n{i - 1}.y"))
    return nodes


def _mixed(pkg: str) -> list[dict[str, Any]]:
    """A diamond whose branches are chains, an extract node between chains, a join."""
    return [
        inp("x"),
        fn("a", f"{pkg}/inc", x="x"),
        fn("b1", f"{pkg}/inc", x="a.y"),
        fn("b2", f"{pkg}/inc", x="b1.y"),
        fn("c1", f"{pkg}/inc", x="a.y"),
        ex("pick", "pick", "c1", "y"),
        fn("c2", f"{pkg}/inc", x="pick.value"),
        fn("c3", f"{pkg}/inc", x="c2.y"),
        fn("d", f"{pkg}/add", a="b2.y", b="c3.y"),
    ]


async def _run(platform: Platform, nodes: list[dict[str, Any]], x: float) -> dict[str, Any]:
    slug = await _workflow(platform, nodes)
    run = await _start(platform, slug, {"x": x})
    return await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)


async def _job(platform: Platform, job_id: str) -> dict[str, Any]:
    response = await platform.client.get(f"/jobs/{job_id}", headers=platform.headers("alice"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _join(platform: Platform) -> None:
    def join() -> None:
        platform.execution.broker.join(QUEUE)
        assert platform.execution.worker is not None
        platform.execution.worker.join()

    await asyncio.to_thread(join)


def _sandboxes_taken(platform: Platform) -> int:
    stats = platform.runtime.pool.stats
    return stats.hits + stats.starts


@pytest.fixture(params=MODES)
async def mode_platform(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    from tests.execution.conftest import default_sandbox

    async with running_platform(
        exec_url, identity_provider, tmp_path, default_sandbox(), chain_execution=request.param
    ) as platform:
        yield platform


class TestChainOnOneWorker:
    async def test_nodes_run_in_turn_each_under_its_own_job(self, mode_platform: Platform) -> None:
        platform = mode_platform
        pkg = await _package(platform)
        nodes = _line(pkg, ["inc"] * 5)
        await _run(platform, nodes, 0)  # warm: code staged, a sandbox started
        runs, taken = platform.runtime.runs, _sandboxes_taken(platform)
        done = await _run(platform, nodes, 10)
        assert done["status"] == "completed", done
        assert done["plan_snapshot"]["chains"] == [
            {"id": "chain-0", "node_keys": ["n0", "n1", "n2", "n3", "n4"]}
        ]
        assert done["terminal_outputs"] == {"n4": {"y": 15.0}}
        states = done["node_states"]
        assert set(_status(done).values()) == {"success"}
        job_ids = [states[f"n{i}"]["job_id"] for i in range(5)]
        assert len(set(job_ids)) == 5
        for i, job_id in enumerate(job_ids):
            job = await _job(platform, job_id)
            assert (job["node_key"], job["workflow_run_id"]) == (f"n{i}", done["id"])
            assert (job["status"], job["cache_hit"]) == ("success", False)
            assert job["inputs"] == {"x": 10.0 + i}
            assert job["outputs"] == {"y": 11.0 + i} == states[f"n{i}"]["outputs"]
            assert f"inc {10.0 + i}" in job["logs"]
            assert states[f"n{i}"]["attempt"] == 1
            assert states[f"n{i}"]["started_at"] <= states[f"n{i}"]["finished_at"]
        assert platform.runtime.runs == runs + 5
        # Chain execution holds one sandbox for the whole chain; node execution takes one per
        # node from the pool.
        expected = 1 if platform.settings.chain_execution == "chain" else 5
        assert _sandboxes_taken(platform) - taken == expected

    async def test_a_failure_mid_chain_fails_the_run_like_node_execution(
        self, mode_platform: Platform
    ) -> None:
        platform = mode_platform
        pkg = await _package(platform)
        runs = platform.runtime.runs
        failed = await _run(platform, _line(pkg, ["inc", "boom", "inc", "inc"]), 1)
        assert failed["status"] == "failed"
        assert failed["first_failed_node_key"] == "n1"
        assert failed["error_message"] == "node 'n1' failed: user_error: ValueError: boom at 2.0"
        assert failed["completed_at"] is not None
        assert failed["terminal_outputs"] is None
        assert _status(failed) == {
            "n0": "success",
            "n1": "failed",
            "n2": "cancelled",
            "n3": "cancelled",
        }
        states = failed["node_states"]
        assert states["n1"]["error"]["kind"] == "user_error"
        assert states["n2"]["job_id"] is None
        assert states["n3"]["job_id"] is None
        assert platform.runtime.runs == runs + 2
        jobs = await platform.client.get("/jobs", headers=platform.headers("alice"))
        of_run = [j for j in jobs.json()["items"] if j["workflow_run_id"] == failed["id"]]
        assert sorted(j["node_key"] for j in of_run) == ["n0", "n1"]

    async def test_result_cache_applies_per_node(self, mode_platform: Platform) -> None:
        platform = mode_platform
        pkg = await _package(platform)
        first = await _run(platform, _line(pkg, ["inc"] * 3), 100)
        runs = platform.runtime.runs
        # slow(100) = inc(100) runs (another function), then inc(101) and inc(102) are the
        # first run's, from the cache, then inc(103) runs: mid-chain hits.
        again = await _run(platform, _line(pkg, ["slow", "inc", "inc", "inc"]), 100)
        assert again["status"] == "completed"
        assert again["terminal_outputs"] == {"n3": {"y": 104.0}}
        assert platform.runtime.runs == runs + 2
        jobs = [await _job(platform, again["node_states"][f"n{i}"]["job_id"]) for i in range(4)]
        assert [job["cache_hit"] for job in jobs] == [False, True, True, False]
        for i in (1, 2):
            assert jobs[i]["outputs"] == first["node_states"][f"n{i}"]["outputs"]
            assert jobs[i]["inputs"] == {"x": first["node_states"][f"n{i - 1}"]["outputs"]["y"]}
            assert again["node_states"][f"n{i}"]["outputs"] == jobs[i]["outputs"]


class TestRedelivery:
    async def test_a_redelivered_chain_message_never_reruns_a_node(
        self, platform: Platform
    ) -> None:
        assert platform.settings.chain_execution == "chain"
        pkg = await _package(platform)
        slug = await _workflow(platform, _line(pkg, ["slow"] * 3))
        run = await _start(platform, slug, {"x": 0})
        runs = platform.runtime.runs
        first = await _tick(platform, run["id"])
        head = first["node_states"]["n0"]["job_id"]
        # Duplicates while the chain runs, and once it is done.
        for _ in range(2):
            platform.execution.send(Message("chains.run", {"job_id": head}))
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["status"] == "completed"
        assert done["terminal_outputs"] == {"n2": {"y": 3.0}}
        jobs = {k: await _job(platform, s["job_id"]) for k, s in done["node_states"].items()}
        platform.execution.send(Message("chains.run", {"job_id": head}))
        platform.execution.send(Message("chains.run", {"job_id": jobs["n1"]["id"]}))
        await _join(platform)
        assert platform.runtime.runs == runs + 3
        assert {k: await _job(platform, j["id"]) for k, j in jobs.items()} == jobs
        assert await _tick(platform, run["id"]) == done


class TestBothModes:
    async def test_both_modes_give_the_same_outputs_and_failures(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        from tests.execution.conftest import default_sandbox

        seen: dict[str, list[dict[str, Any]]] = {}
        for mode in MODES:
            async with running_platform(
                exec_url,
                identity_provider,
                tmp_path / mode,
                default_sandbox(),
                chain_execution=mode,
            ) as platform:
                pkg = await _package(platform)
                mixed = await _run(platform, _mixed(pkg), 1)
                failing = await _run(platform, _line(pkg, ["inc", "inc", "boom", "inc"]), 5)
                seen[mode] = [mixed, failing]
        for chained, per_node in zip(seen["chain"], seen["node"], strict=True):
            for field in ("status", "terminal_outputs", "error_message", "first_failed_node_key"):
                assert chained[field] == per_node[field], field
            assert _status(chained) == _status(per_node)
            for key, state in chained["node_states"].items():
                assert state["outputs"] == per_node["node_states"][key]["outputs"], key
        mixed = seen["chain"][0]
        assert mixed["status"] == "completed"
        chains = {c["id"]: c["node_keys"] for c in mixed["plan_snapshot"]["chains"]}
        assert ["b1", "b2"] in chains.values()
        assert ["c2", "c3"] in chains.values()
        # a=2; b: 3, 4; c1=3, pick=3, c: 4, 5; d = 4 + 5.
        assert mixed["terminal_outputs"] == {"d": {"y": 9.0}}
        assert mixed["node_states"]["pick"]["outputs"] == {"value": 3.0}
        assert seen["chain"][1]["first_failed_node_key"] == "n2"


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
async def test_chains_run_on_each_local_sandbox(
    sandbox: str, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> None:
    if sandbox not in available_sandboxes():
        pytest.skip(f"the {sandbox} sandbox is not available here")
    async with running_platform(exec_url, identity_provider, tmp_path, sandbox) as platform:
        assert platform.runtime.backend.name == sandbox
        pkg = await _package(platform)
        done = await _run(platform, _line(pkg, ["inc"] * 3), 3)
        assert done["status"] == "completed"
        assert done["terminal_outputs"] == {"n2": {"y": 6.0}}
        failed = await _run(platform, _line(pkg, ["inc", "boom", "inc"]), 3)
        assert (failed["status"], failed["first_failed_node_key"]) == ("failed", "n1")
        assert _status(failed)["n2"] == "cancelled"


class TestInfrastructureRetry:
    async def test_a_retried_chain_resumes_at_the_released_node(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pkg = await _package(platform)
        slug = await _workflow(platform, _line(pkg, ["inc", "slow", "inc"]))
        run = await _start(platform, slug, {"x": 0})
        versions = {
            node["node_key"]: node["function_version_id"] for node in run["plan_snapshot"]["nodes"]
        }
        real_target = platform.runtime.target
        failures: list[str] = []

        def flaky_target(function_version_id: str) -> Any:
            if function_version_id == versions["n1"] and not failures:
                failures.append(function_version_id)
                raise RuntimeError("code store unreachable")
            return real_target(function_version_id)

        monkeypatch.setattr(platform.runtime, "target", flaky_target)
        runs = platform.runtime.runs
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert failures == [versions["n1"]]
        assert done["status"] == "completed", done
        assert done["terminal_outputs"] == {"n2": {"y": 3.0}}
        assert platform.runtime.runs == runs + 3  # n1 ran once, after the retry
        assert {s["attempt"] for s in done["node_states"].values()} == {1}
        n1 = await _job(platform, done["node_states"]["n1"]["job_id"])
        assert (n1["status"], n1["outputs"]) == ("success", {"y": 2.0})


class TestHandOff:
    async def test_a_long_chain_goes_on_in_new_messages(
        self, platform: Platform, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import calcgraph.workers.chains

        # Every link past the first hands over: what a chain does past the actor's time budget.
        monkeypatch.setattr(calcgraph.workers.chains, "HAND_OFF_SECONDS", -1.0)
        pkg = await _package(platform)
        runs, taken = platform.runtime.runs, _sandboxes_taken(platform)
        done = await _run(platform, _line(pkg, ["inc"] * 4), 20)
        assert done["status"] == "completed", done
        assert done["terminal_outputs"] == {"n3": {"y": 24.0}}
        assert platform.runtime.runs == runs + 4
        assert _sandboxes_taken(platform) - taken == 4  # one message (and sandbox) per node
        for i in range(4):
            job = await _job(platform, done["node_states"][f"n{i}"]["job_id"])
            assert (job["status"], job["inputs"]) == ("success", {"x": 20.0 + i})
