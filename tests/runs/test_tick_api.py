"""The tick end to end: real workers and real sandboxes over a committed temporary database.

Runs are driven the way a client drives them: `POST /workflow-runs/{id}/tick`, long-polled with
`?wait=S` so no test sleeps or busy-polls.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from calcgraph.demo import DEMO_INPUTS, workflow_document
from tests.execution.conftest import Platform
from tests.packages.publishing import demo_body, publish, small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

CODE = """
import time

def inc(x):
    return {"y": x + 1}

def add(a, b):
    return {"y": a + b}

def boom(x):
    raise ValueError(f"boom at {x}")

def slow(x):
    time.sleep(x)
    return {"y": x}
"""
F = {"type": "Float", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "add": {"handler": "main:add", "inputs": {"a": F, "b": F}, "outputs": OUT},
    "boom": {"handler": "main:boom", "inputs": {"x": F}, "outputs": OUT},
    "slow": {"handler": "main:slow", "inputs": {"x": F}, "outputs": OUT},
}
TERMINAL = ("completed", "failed", "cancelled")


async def _package(platform: Platform) -> str:
    name = f"nodes-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    return name


async def _workflow(platform: Platform, nodes: list[dict[str, Any]]) -> str:
    slug = f"wf-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    response = await platform.client.post(
        "/workflows", json=body, headers=platform.headers("alice")
    )
    assert response.status_code == 201, response.text
    return slug


async def _start(platform: Platform, slug: str, inputs: dict[str, Any]) -> dict[str, Any]:
    response = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": inputs}, headers=platform.headers("alice")
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _tick(platform: Platform, run_id: str, wait: float | None = None) -> dict[str, Any]:
    params = {} if wait is None else {"wait": wait}
    response = await platform.client.post(
        f"/workflow-runs/{run_id}/tick", params=params, headers=platform.headers("alice")
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _until(platform: Platform, run_id: str, done: Any, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    run = await _tick(platform, run_id)
    while not done(run):
        assert time.monotonic() < deadline, f"run did not get there: {run}"
        run = await _tick(platform, run_id, wait=5)
    return run


def _status(run: dict[str, Any]) -> dict[str, str]:
    return {key: state["status"] for key, state in run["node_states"].items()}


class TestDemo:
    async def test_demo_workflow_runs_to_completion(self, platform: Platform) -> None:
        await publish(platform.client, platform.headers("alice"), demo_body())
        slug = f"beam-{uuid.uuid4().hex[:8]}"
        body = {"slug": slug, "name": "Beam", "graph": workflow_document()}
        created = await platform.client.post(
            "/workflows", json=body, headers=platform.headers("alice")
        )
        assert created.status_code == 201, created.text
        run = await _start(platform, slug, DEMO_INPUTS)
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert run["status"] == "completed", run
        assert run["completed_at"] is not None
        assert run["inputs"] == DEMO_INPUTS
        assert set(run["terminal_outputs"]) == {"verdict"}
        assert run["terminal_outputs"]["verdict"]["verdict"].startswith("PASS")
        states = run["node_states"]
        assert set(_status(run).values()) == {"success"}
        # The extract node ran in-process on SI values: 12 kN at 3 m.
        assert states["root_moment"]["outputs"] == {"value": pytest.approx(36000.0)}
        assert states["root_moment"]["job_id"] is None
        assert states["beam"]["outputs"]["moment"] == pytest.approx(36000.0)
        job = await platform.client.get(
            f"/jobs/{states['beam']['job_id']}", headers=platform.headers("alice")
        )
        assert job.status_code == 200
        assert job.json()["inputs"]["force"] == pytest.approx(12000.0)
        # Idempotent once terminal: the same state, the same revision.
        again = await _tick(platform, run["id"])
        assert again == run


class TestDiamond:
    async def test_branches_are_submitted_in_the_same_tick(self, platform: Platform) -> None:
        pkg = await _package(platform)
        slug = await _workflow(
            platform,
            [
                inp("x"),
                fn("A", f"{pkg}/inc", x="x"),
                fn("B", f"{pkg}/inc", x="A.y"),
                fn("C", f"{pkg}/inc", x="A.y"),
                fn("D", f"{pkg}/add", a="B.y", b="C.y"),
            ],
        )
        run = await _start(platform, slug, {"x": 1})
        first = await _tick(platform, run["id"])
        assert first["status"] == "running"
        assert _status(first) == {"A": "running", "B": "pending", "C": "pending", "D": "pending"}
        assert first["node_states"]["A"]["job_id"]
        assert first["node_states"]["A"]["attempt"] == 1
        seen = await _until(
            platform, run["id"], lambda r: r["node_states"]["A"]["status"] != "running"
        )
        # The tick that saw A succeed submitted both branches.
        assert _status(seen)["A"] == "success"
        assert {_status(seen)["B"], _status(seen)["C"]} <= {"running", "success"}
        assert seen["node_states"]["B"]["started_at"] == seen["node_states"]["C"]["started_at"]
        assert _status(seen)["D"] == "pending"
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["status"] == "completed"
        assert done["terminal_outputs"] == {"D": {"y": 6.0}}
        assert done["node_states"]["B"]["outputs"] == {"y": 3.0}
        assert done["first_failed_node_key"] is None


class TestIdempotency:
    async def test_a_tick_with_nothing_finished_changes_nothing(self, platform: Platform) -> None:
        pkg = await _package(platform)
        slug = await _workflow(platform, [inp("x"), fn("S", f"{pkg}/slow", x="x")])
        run = await _start(platform, slug, {"x": 1.5})
        first = await _tick(platform, run["id"])
        second = await _tick(platform, run["id"])
        assert second == first
        assert first["revision"] == 1
        jobs = await platform.client.get("/jobs", headers=platform.headers("alice"))
        assert [j["node_key"] for j in jobs.json()["items"]].count("S") == 1
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["terminal_outputs"] == {"S": {"y": 1.5}}


class TestFailure:
    async def test_downstream_cancelled_independent_branch_continues(
        self, platform: Platform
    ) -> None:
        pkg = await _package(platform)
        slug = await _workflow(
            platform,
            [
                inp("x"),
                inp("t"),
                fn("A", f"{pkg}/inc", x="x"),
                fn("F", f"{pkg}/boom", x="A.y"),
                fn("S", f"{pkg}/slow", x="t"),
                fn("D", f"{pkg}/add", a="F.y", b="A.y"),
            ],
        )
        run = await _start(platform, slug, {"x": 1, "t": 2.0})
        failed = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert failed["status"] == "failed"
        assert failed["first_failed_node_key"] == "F"
        assert "F" in failed["error_message"]
        assert failed["completed_at"] is not None
        assert failed["terminal_outputs"] is None
        states = failed["node_states"]
        assert states["F"]["status"] == "failed"
        assert states["F"]["error"]["kind"] == "user_error"
        assert "boom at 2" in states["F"]["error"]["message"]
        assert states["D"]["status"] == "cancelled"
        assert states["D"]["job_id"] is None
        assert states["S"]["status"] == "running"  # not interrupted
        later = await _until(
            platform, run["id"], lambda r: r["node_states"]["S"]["status"] != "running"
        )
        assert later["node_states"]["S"]["status"] == "success"
        assert later["node_states"]["S"]["outputs"] == {"y": 2.0}
        assert later["status"] == "failed"
        assert later["first_failed_node_key"] == "F"


class TestLongPoll:
    async def test_wait_returns_when_a_job_finishes(self, platform: Platform) -> None:
        pkg = await _package(platform)
        slug = await _workflow(platform, [inp("x"), fn("S", f"{pkg}/slow", x="x")])
        run = await _start(platform, slug, {"x": 1.0})
        first = await _tick(platform, run["id"])  # submits S and answers at once
        assert _status(first) == {"S": "running"}
        assert await _tick(platform, run["id"]) == first  # a plain tick never waits
        waited = time.monotonic()
        done = await _tick(platform, run["id"], wait=30)
        elapsed = time.monotonic() - waited
        assert done["status"] == "completed", done
        assert elapsed < 10, elapsed  # woken by the job's completion, not by the 30 s bound

    async def test_wait_bounds(self, platform: Platform) -> None:
        pkg = await _package(platform)
        slug = await _workflow(platform, [inp("x"), fn("S", f"{pkg}/slow", x="x")])
        run = await _start(platform, slug, {"x": 3})
        headers = platform.headers("alice")
        bad = await platform.client.post(
            f"/workflow-runs/{run['id']}/tick", params={"wait": "-1"}, headers=headers
        )
        assert bad.status_code == 422
        # Nothing runs yet: a long-poll on a pending run does not wait, it ticks.
        started = time.monotonic()
        first = await _tick(platform, run["id"], wait=5)
        assert time.monotonic() - started < 4  # S takes 3 s: the tick did not wait for it
        assert _status(first) == {"S": "running"}
        started = time.monotonic()
        still = await _tick(platform, run["id"], wait=0.3)
        assert 0.25 < time.monotonic() - started < 2.5
        assert still["revision"] == first["revision"]
