"""Run control end to end (contract section 10): real workers and sandboxes over a committed
temporary database, driven over REST as a client drives it.

Cancel stops a running job's sandbox: the handler sleeps far longer than the test waits and the
sandbox's own timeout is set beyond it, so a job that stops at all was stopped by the cancel."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from calcgraph.domain.jobs.models import Job
from calcgraph.workers.runtime import CodeRuntime
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import _status, _tick, _until
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

CODE = """
import time

def inc(x):
    return {"y": x + 1}

def guard(a, limit):
    if a > limit:
        raise ValueError(f"{a} is over {limit}")
    return {"y": a}

def nap(x):
    time.sleep(x)
    return {"y": x}
"""
F = {"type": "Float", "required": True}
OUT = {"y": {"type": "Float"}}
FUNCTIONS = {
    "inc": {"handler": "main:inc", "inputs": {"x": F}, "outputs": OUT},
    "guard": {"handler": "main:guard", "inputs": {"a": F, "limit": F}, "outputs": OUT},
    "nap": {"handler": "main:nap", "inputs": {"x": F}, "outputs": OUT},
}
TERMINAL = ("completed", "failed", "cancelled")
LONG = 120.0
"""Seconds a napping handler sleeps: beyond any wait here."""


@pytest.fixture
async def platform(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        default_sandbox(),
        sandbox_timeout_seconds=LONG * 2,
        job_cancel_check_seconds=0.5,
    ) as p:
        yield p


async def _package(platform: Platform, user: str = "alice", visibility: str = "public") -> str:
    name = f"ctl-{uuid.uuid4().hex[:8]}"
    report = await publish(
        platform.client,
        platform.headers(user),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS, visibility=visibility),
    )
    return f"{name}|{report['package_id']}"


async def _workflow(platform: Platform, nodes: list[dict[str, Any]], user: str = "alice") -> str:
    slug = f"wf-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    response = await platform.client.post("/workflows", json=body, headers=platform.headers(user))
    assert response.status_code == 201, response.text
    return slug


async def _start(
    platform: Platform, slug: str, inputs: dict[str, Any], user: str = "alice", **extra: Any
) -> dict[str, Any]:
    response = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": inputs, **extra}, headers=platform.headers(user)
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _job(platform: Platform, job_id: str, user: str = "alice") -> dict[str, Any]:
    response = await platform.client.get(f"/jobs/{job_id}", headers=platform.headers(user))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _napping_run(platform: Platform) -> tuple[dict[str, Any], str]:
    """A run whose node `n` is running a handler that sleeps LONG seconds."""
    name = (await _package(platform)).split("|")[0]
    slug = await _workflow(platform, [inp("x"), fn("n", f"{name}/nap", x="x")])
    run = await _start(platform, slug, {"x": LONG})
    run = await _until(platform, run["id"], lambda r: r["node_states"]["n"]["status"] == "running")
    job_id = run["node_states"]["n"]["job_id"]
    await _running_here(platform, job_id)
    return run, job_id


async def _finish_as(platform: Platform, run_id: str, user: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        response = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": 5}, headers=platform.headers(user)
        )
        assert response.status_code == 200, response.text
        run: dict[str, Any] = response.json()
        if run["status"] in TERMINAL:
            return run
        assert time.monotonic() < deadline, f"run did not end: {run}"


async def _until_a_lock_is_awaited(engine: AsyncEngine, request: asyncio.Future[Any]) -> None:
    """Until the request's UPDATE of the jobs waits for a lock (the job's row; a worker's
    heartbeat waiting too updates `heartbeat_at` only)."""
    deadline = time.monotonic() + 60
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE jobs SET status%'"
    )
    while True:
        assert not request.done(), f"the request did not wait: {request.result().text}"
        async with engine.connect() as connection:
            if (await connection.scalar(waiting)) or 0:
                return
        assert time.monotonic() < deadline, "no session waited for the job's row"
        await asyncio.sleep(0.05)


def _code_runtime(platform: Platform) -> CodeRuntime:
    runtime = platform.runtime
    assert isinstance(runtime, CodeRuntime)
    return runtime


async def _running_here(platform: Platform, job_id: str) -> None:
    """Until the in-process worker runs the job in a sandbox."""
    deadline = time.monotonic() + 60
    while job_id not in _code_runtime(platform).running.snapshot():
        assert time.monotonic() < deadline, "the job never started in a sandbox"
        await asyncio.sleep(0.05)


async def _gone(platform: Platform, job_id: str) -> None:
    """Until the job's sandbox no longer runs it (it sleeps LONG seconds: only a kill ends it
    before then; the bound is generous for a loaded machine, and no speed is asserted)."""
    deadline = time.monotonic() + LONG - 15
    while job_id in _code_runtime(platform).running.snapshot():
        assert time.monotonic() < deadline, "the cancelled job's sandbox was not killed"
        await asyncio.sleep(0.05)


class TestCancelRun:
    async def test_cancel_stops_the_running_job_and_its_sandbox(self, platform: Platform) -> None:
        run, job_id = await _napping_run(platform)
        pool = _code_runtime(platform).pool
        discarded = pool.stats.discarded
        response = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert response.status_code == 200, response.text
        cancelled = response.json()
        assert cancelled["status"] == "cancelled"
        assert cancelled["completed_at"] is not None
        assert _status(cancelled) == {"n": "cancelled"}
        job = await _job(platform, job_id)
        assert job["status"] == "failed"
        assert job["error"]["kind"] == "cancelled"
        await _gone(platform, job_id)
        assert pool.stats.discarded > discarded  # its warm slot is not given back
        # Contract 9: the run's end and the stopped job's end are events, once each.
        events = await platform.client.get(
            "/events",
            params=[("type", "calcgraph.run.*"), ("type", "calcgraph.job.failed")],
            headers=platform.headers("alice"),
        )
        assert events.status_code == 200, events.text
        ours = [
            (e["type"], e["subject"])
            for e in events.json()["items"]
            if e["subject"] in (run["id"], job_id)
        ]
        assert ours.count(("calcgraph.run.cancelled", run["id"])) == 1
        assert ours.count(("calcgraph.job.failed", job_id)) == 1
        # Later ticks change nothing.
        again = await _tick(platform, run["id"])
        assert again["status"] == "cancelled"
        assert again["revision"] == cancelled["revision"]
        assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
        # A second cancel: the run ended.
        conflict = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert conflict.status_code == 409
        assert conflict.json()["detail"].startswith("Conflict: ")

    async def test_another_user_cannot_cancel(self, platform: Platform) -> None:
        run, job_id = await _napping_run(platform)
        for headers in (platform.headers("bob"), {}):
            response = await platform.client.post(
                f"/workflow-runs/{run['id']}/cancel", headers=headers
            )
            assert response.status_code in (401, 403, 404), response.text
        assert (await _tick(platform, run["id"]))["status"] == "running"
        assert (await _job(platform, job_id))["status"] == "running"
        unknown = await platform.client.post(
            "/workflow-runs/no-such-run/cancel", headers=platform.headers("alice")
        )
        assert unknown.status_code == 404
        done = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert done.status_code == 200

    async def test_cancel_racing_ticks_has_one_outcome(self, platform: Platform) -> None:
        run, job_id = await _napping_run(platform)

        async def tick() -> int:
            response = await platform.client.post(
                f"/workflow-runs/{run['id']}/tick", headers=platform.headers("alice")
            )
            return response.status_code

        async def cancel() -> int:
            response = await platform.client.post(
                f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
            )
            return response.status_code

        statuses = await asyncio.gather(*[tick() for _ in range(25)], cancel(), cancel())
        assert set(statuses[:25]) == {200}
        assert sorted(statuses[25:]) == [200, 409]  # one cancel wins, the other sees it ended
        final = await _tick(platform, run["id"])
        assert final["status"] == "cancelled"
        assert _status(final) == {"n": "cancelled"}
        assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
        await _gone(platform, job_id)

    async def test_cancel_racing_the_last_jobs_finish(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, [inp("x"), fn("i", f"{name}/inc", x="x")])
        run = await _start(platform, slug, {"x": 1.0})
        run = await _tick(platform, run["id"])  # submits `i`, which finishes at once
        job_id = run["node_states"]["i"]["job_id"]
        response = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert response.status_code == 200, response.text
        cancelled = response.json()
        assert _status(cancelled) == {"i": "cancelled"}
        job = await _job(platform, job_id)
        # Either the job finished first (it keeps its outputs) or the cancel stopped it.
        if job["status"] == "success":
            assert job["outputs"] == {"y": 2.0}
        else:
            assert job["error"]["kind"] == "cancelled"
        final = await _tick(platform, run["id"], wait=1)
        assert final["status"] == "cancelled"
        assert _status(final) == {"i": "cancelled"}
        assert final["terminal_outputs"] is None

    async def test_a_cancel_waiting_for_a_jobs_row_does_not_hold_the_event_sequencer(
        self, platform: Platform, exec_url: str
    ) -> None:
        """A worker finishing a job locks the job's row, then the event sequencer's row (the
        statement writing its events). Another transaction takes them in that order while a
        cancel waits for the job's row: the cancel must not hold the sequencer's row then.
        It did (its tick wrote the run's end with the sequencer's row, then it updated the
        jobs): PostgreSQL found a deadlock and the cancel answered 503."""
        if not exec_url.startswith("postgresql"):
            pytest.skip("SQLite has one writer at a time: no row locks to order")
        run, job_id = await _napping_run(platform)
        engine = create_async_engine(exec_url)
        try:
            async with engine.connect() as finisher:
                await finisher.execute(text("SET LOCAL lock_timeout = '60s'"))
                await finisher.execute(
                    text("UPDATE jobs SET heartbeat_at = heartbeat_at WHERE id = :id"),
                    {"id": job_id},
                )
                cancel = asyncio.ensure_future(
                    platform.client.post(
                        f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
                    )
                )
                await _until_a_lock_is_awaited(engine, cancel)
                await finisher.execute(
                    text(
                        "INSERT INTO event_cursors (name, position) VALUES ('sequence', 0) "
                        "ON CONFLICT (name) DO UPDATE SET position = event_cursors.position"
                    )
                )
                await finisher.commit()
            response = await cancel
        finally:
            await engine.dispose()
        assert response.status_code == 200, response.text
        assert _status(response.json()) == {"n": "cancelled"}
        assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
        await _gone(platform, job_id)

    async def test_a_job_that_finished_first_keeps_its_outputs_and_its_node_stays_cancelled(
        self, platform: Platform
    ) -> None:
        """The race's one branch made certain: the job ended `success` before the cancel and
        no tick has reconciled it yet. The cancel reconciles nothing: the node is cancelled,
        the job keeps its outputs, the run has no terminal outputs, later ticks keep it so."""
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, [inp("x"), fn("i", f"{name}/inc", x="x")])
        run = await _start(platform, slug, {"x": 1.0})
        if run["node_states"]["i"]["job_id"] is None:
            run = await _tick(platform, run["id"])  # submits `i`
        job_id = run["node_states"]["i"]["job_id"]
        assert run["node_states"]["i"]["status"] == "running"
        deadline = time.monotonic() + 60
        while (job := await _job(platform, job_id))["status"] != "success":
            assert time.monotonic() < deadline, job
            await asyncio.sleep(0.05)
        response = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert response.status_code == 200, response.text
        cancelled = response.json()
        assert cancelled["status"] == "cancelled"
        assert _status(cancelled) == {"i": "cancelled"}
        assert cancelled["terminal_outputs"] is None
        after = await _job(platform, job_id)
        assert (after["status"], after["outputs"], after["error"]) == ("success", {"y": 2.0}, None)
        assert after["finished_at"] == job["finished_at"]
        final = await _tick(platform, run["id"], wait=1)
        assert (final["status"], final["revision"]) == ("cancelled", cancelled["revision"])
        assert _status(final) == {"i": "cancelled"}
        assert final["terminal_outputs"] is None

    async def test_an_admin_may_cancel_anothers_run_and_job(self, platform: Platform) -> None:
        run, job_id = await _napping_run(platform)
        admin = platform.headers("root", roles=["admin", "user"])
        response = await platform.client.post(f"/workflow-runs/{run['id']}/cancel", headers=admin)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "cancelled"
        assert (await _job(platform, job_id))["error"]["kind"] == "cancelled"
        await _gone(platform, job_id)
        name = (await _package(platform)).split("|")[0]
        sent = await platform.client.post(
            f"/packages/{name}/functions/nap/execute",
            json={"inputs": {"x": LONG}},
            params={"wait": 0},
            headers=platform.headers("alice"),
        )
        assert sent.status_code == 202, sent.text
        stopped = await platform.client.post(f"/jobs/{sent.json()['job_id']}/cancel", headers=admin)
        assert stopped.status_code == 200, stopped.text
        assert (stopped.json()["status"], stopped.json()["error"]["kind"]) == (
            "failed",
            "cancelled",
        )
        await _gone(platform, sent.json()["job_id"])

    async def test_a_chain_stops_before_its_next_node(self, platform: Platform) -> None:
        """A chain q -> n -> r -> s runs as one worker job (chain execution): cancelled while
        n naps, n's sandbox is killed and the chain runs neither r nor s (no job for either),
        q keeps its success."""
        assert platform.settings.chain_execution == "chain"
        name = (await _package(platform)).split("|")[0]
        nodes = [
            inp("x"),
            fn("q", f"{name}/inc", x="x"),
            fn("n", f"{name}/nap", x="q.y"),
            fn("r", f"{name}/inc", x="n.y"),
            fn("s", f"{name}/inc", x="r.y"),
        ]
        slug = await _workflow(platform, nodes)
        run = await _start(platform, slug, {"x": LONG - 1})
        assert [c["node_keys"] for c in run["plan_snapshot"]["chains"]] == [["q", "n", "r", "s"]]
        run = await _until(
            platform, run["id"], lambda r: r["node_states"]["n"]["status"] == "running"
        )
        job_id = run["node_states"]["n"]["job_id"]
        await _running_here(platform, job_id)
        response = await platform.client.post(
            f"/workflow-runs/{run['id']}/cancel", headers=platform.headers("alice")
        )
        assert response.status_code == 200, response.text
        assert _status(response.json()) == {
            "q": "success",
            "n": "cancelled",
            "r": "cancelled",
            "s": "cancelled",
        }
        await _gone(platform, job_id)
        await asyncio.sleep(2.0)  # time for a chain that went on to write r's job
        async with platform.database.read_session() as session:
            rows = await session.execute(
                select(Job.node_key, Job.status, Job.error).where(Job.workflow_run_id == run["id"])
            )
            jobs = {key: (status, (error or {}).get("kind")) for key, status, error in rows}
        assert jobs == {"q": ("success", None), "n": ("failed", "cancelled")}
        final = await _tick(platform, run["id"])
        assert final["status"] == "cancelled"
        assert final["node_states"]["r"]["job_id"] is None
        assert final["node_states"]["s"]["job_id"] is None


class TestCancelJob:
    async def test_cancel_a_job(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        response = await platform.client.post(
            f"/packages/{name}/functions/nap/execute",
            json={"inputs": {"x": LONG}},
            params={"wait": 0},
            headers=platform.headers("alice"),
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        denied = await platform.client.post(
            f"/jobs/{job_id}/cancel", headers=platform.headers("bob")
        )
        assert denied.status_code in (403, 404)
        assert (await _job(platform, job_id))["status"] in ("queued", "running")
        cancelled = await platform.client.post(
            f"/jobs/{job_id}/cancel", headers=platform.headers("alice")
        )
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "failed"
        assert cancelled.json()["error"]["kind"] == "cancelled"
        await _gone(platform, job_id)
        again = await platform.client.post(
            f"/jobs/{job_id}/cancel", headers=platform.headers("alice")
        )
        assert again.status_code == 409


def _guarded(name: str) -> list[dict[str, Any]]:
    return [
        inp("x"),
        inp("lim"),
        fn("a", f"{name}/inc", x="x"),
        fn("g", f"{name}/guard", a="a.y", limit="lim"),
    ]


class TestRerun:
    async def test_rerun_from_failure_reuses_what_succeeded(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, _guarded(name))
        first = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
        first = await _until(platform, first["id"], lambda r: r["status"] in TERMINAL)
        assert first["status"] == "failed"
        assert first["first_failed_node_key"] == "g"
        rerun = await platform.client.post(
            f"/workflow-runs/{first['id']}/rerun",
            json={"inputs": {"lim": 10.0}},
            headers=platform.headers("alice"),
        )
        assert rerun.status_code == 201, rerun.text
        second = rerun.json()
        assert second["rerun_of"] == first["id"]
        listed = await platform.client.get("/workflow-runs", headers=platform.headers("alice"))
        assert {r["id"]: r["rerun_of"] for r in listed.json()["items"]}[second["id"]] == first["id"]
        assert second["inputs"] == {"x": 1.0, "lim": 10.0}
        reused = second["node_states"]["a"]
        assert reused["status"] == "success"
        assert reused["reused"] is True
        assert reused["job_id"] == first["node_states"]["a"]["job_id"]
        assert reused["outputs"] == {"y": 2.0}
        assert second["node_states"]["g"]["status"] == "pending"
        second = await _until(platform, second["id"], lambda r: r["status"] in TERMINAL)
        assert second["status"] == "completed"
        assert second["node_states"]["a"]["job_id"] == first["node_states"]["a"]["job_id"]
        assert second["terminal_outputs"] == {"g": {"y": 2.0}}
        jobs = (await platform.client.get("/jobs", headers=platform.headers("alice"))).json()
        of_rerun = [j for j in jobs["items"] if j.get("workflow_run_id") == second["id"]]
        assert [j["node_key"] for j in of_rerun] == ["g"]  # one job submitted

    async def test_rerun_from_start_runs_everything(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, _guarded(name))
        first = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
        first = await _until(platform, first["id"], lambda r: r["status"] in TERMINAL)
        rerun = await platform.client.post(
            f"/workflow-runs/{first['id']}/rerun",
            json={"from": "start", "workflow_version": "latest"},
            headers=platform.headers("alice"),
        )
        assert rerun.status_code == 201, rerun.text
        assert set(_status(rerun.json()).values()) == {"pending"}

    async def test_the_same_or_the_latest_version_and_the_plan_keeps_its_policy(
        self, platform: Platform
    ) -> None:
        """A run keeps the retry policy frozen in its plan though the workflow is changed
        after its creation; a re-run with `same` runs the original version (its policy), with
        `latest` the new one."""
        name = (await _package(platform)).split("|")[0]

        def graph(attempts: int) -> dict[str, Any]:
            nodes = _guarded(name)
            nodes[3]["retry"] = {
                "max_attempts": attempts,
                "initial_interval_s": 0,
                "on": ["user_error"],
            }
            return {"nodes": nodes}

        alice = platform.headers("alice")
        slug = f"wf-{uuid.uuid4().hex[:8]}"
        created = await platform.client.post(
            "/workflows", json={"slug": slug, "name": slug, **{"graph": graph(2)}}, headers=alice
        )
        assert created.status_code == 201, created.text
        first = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
        changed = await platform.client.put(
            f"/workflows/{slug}", json={"graph": graph(3)}, headers=alice
        )
        assert changed.status_code == 200, changed.text
        first = await _until(platform, first["id"], lambda r: r["status"] in TERMINAL)
        assert first["status"] == "failed"
        assert first["node_states"]["g"]["attempt"] == 2  # the plan's policy, not the new one
        assert len(first["node_states"]["g"]["attempts"]) == 1

        def policy(run: dict[str, Any]) -> int:
            node = next(n for n in run["plan_snapshot"]["nodes"] if n["node_key"] == "g")
            return int(node["retry"]["max_attempts"])

        answers = {}
        for version in ("same", "latest"):
            response = await platform.client.post(
                f"/workflow-runs/{first['id']}/rerun",
                json={"workflow_version": version},
                headers=alice,
            )
            assert response.status_code == 201, response.text
            answers[version] = response.json()
        same, latest = answers["same"], answers["latest"]
        assert same["workflow_version_id"] == first["workflow_version_id"]
        assert policy(same) == 2
        assert latest["workflow_version_id"] != first["workflow_version_id"]
        assert policy(latest) == 3
        for rerun in (same, latest):
            assert rerun["node_states"]["a"]["reused"] is True  # same function, same inputs
        latest = await _until(platform, latest["id"], lambda r: r["status"] in TERMINAL)
        assert (latest["status"], latest["node_states"]["g"]["attempt"]) == ("failed", 3)

    async def test_refusals(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, _guarded(name))
        run = await _start(platform, slug, {"x": 1.0, "lim": 0.0})
        path = f"/workflow-runs/{run['id']}/rerun"
        alice = platform.headers("alice")
        pending = await platform.client.post(path, json={}, headers=alice)
        assert pending.status_code == 409, pending.text
        await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        wrong = await platform.client.post(path, json={"inputs": {"x": "many"}}, headers=alice)
        assert wrong.status_code == 422, wrong.text
        assert wrong.json()["detail"].startswith("ValidationError: ")
        unknown = await platform.client.post(path, json={"inputs": {"zz": 1}}, headers=alice)
        assert unknown.status_code == 422
        bad_from = await platform.client.post(path, json={"from": "middle"}, headers=alice)
        assert bad_from.status_code == 422
        nul = await platform.client.post(path, json={"inputs": {"x": "\u0000"}}, headers=alice)
        assert nul.status_code == 422
        other = await platform.client.post(path, json={}, headers=platform.headers("bob"))
        assert other.status_code in (403, 404)

    async def test_rerun_of_a_function_no_longer_executable_is_refused(
        self, platform: Platform
    ) -> None:
        name, package_id = (await _package(platform, "alice", "public")).split("|")
        slug = await _workflow(platform, _guarded(name), user="bob")
        run = await _start(platform, slug, {"x": 1.0, "lim": 0.0}, user="bob")
        run = await _finish_as(platform, run["id"], "bob")
        hidden = await platform.client.patch(
            f"/packages/{package_id}",
            json={"visibility": "private"},
            headers=platform.headers("alice"),
        )
        assert hidden.status_code == 200, hidden.text
        for body in ({}, {"from": "start"}):
            refused = await platform.client.post(
                f"/workflow-runs/{run['id']}/rerun", json=body, headers=platform.headers("bob")
            )
            assert refused.status_code == 403, refused.text
            assert refused.json()["detail"].startswith("PermissionDenied: ")


class TestRetry:
    async def test_a_failing_node_is_retried_then_the_run_fails(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        guard = fn("g", f"{name}/guard", a="x", limit="lim")
        guard["retry"] = {"max_attempts": 3, "initial_interval_s": 0, "on": ["user_error"]}
        slug = await _workflow(platform, [inp("x"), inp("lim"), guard])
        workflow = await platform.client.get(
            f"/workflows/{slug}", headers=platform.headers("alice")
        )
        assert workflow.status_code == 200
        run = await _start(platform, slug, {"x": 5.0, "lim": 0.0})
        assert run["plan_snapshot"]["nodes"][0]["retry"]["max_attempts"] == 3
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert run["status"] == "failed"
        state = run["node_states"]["g"]
        assert state["attempt"] == 3
        assert [a["attempt"] for a in state["attempts"]] == [1, 2]
        assert all(a["error"]["kind"] == "user_error" for a in state["attempts"])
        assert len({a["job_id"] for a in state["attempts"]} | {state["job_id"]}) == 3

    async def test_attempt_jobs_in_graphql(self, platform: Platform) -> None:
        """`attemptJobs`: the earlier attempts' jobs with their timings, in attempt order, for
        the whole list and one node alike; another user reads no run at all."""
        name = (await _package(platform)).split("|")[0]
        guard = fn("g", f"{name}/guard", a="x", limit="lim")
        guard["retry"] = {"max_attempts": 3, "initial_interval_s": 0, "on": ["user_error"]}
        slug = await _workflow(platform, [inp("x"), inp("lim"), guard])
        run = await _start(platform, slug, {"x": 5.0, "lim": 0.0})
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        earlier = [a["job_id"] for a in run["node_states"]["g"]["attempts"]]
        assert len(earlier) == 2
        # No JSON value (`error` is in `attempts`): 20 nodes of 20 attempts' errors would be
        # estimated past the answer bound.
        jobs = "attemptJobs { id status createdAt startedAt finishedAt cacheHit }"
        query = (
            "query($id: ID!) { workflowRun(id: $id) { nodeStates { nodeKey jobId "
            f'{jobs} }} one: nodeState(key: "g") {{ {jobs} }} }} }}'
        )
        answer = await _gql(platform, query, id=run["id"])
        assert "errors" not in answer, answer
        whole = answer["data"]["workflowRun"]["nodeStates"][0]["attemptJobs"]
        one = answer["data"]["workflowRun"]["one"]["attemptJobs"]
        assert [j["id"] for j in whole] == earlier
        assert one == whole
        for job in whole:
            assert job["status"] == "failed"
            assert job["cacheHit"] is False
            assert job["createdAt"] <= job["finishedAt"]
        denied = await _gql(platform, query, user="bob", id=run["id"])
        assert denied.get("data") is None or denied["data"]["workflowRun"] is None
        assert denied["errors"][0]["extensions"]["code"] in ("NotFound", "PermissionDenied")

    async def test_the_default_kinds_and_the_time_of_the_next_attempt(
        self, platform: Platform
    ) -> None:
        """`on` left out: every kind but user_error, so a user error fails at once. With
        user_error in `on`, the failed attempt's node waits `pending` until `retry_at` = its
        job's `finished_at` + initial_interval_s (then the coefficient doubles it)."""
        name = (await _package(platform)).split("|")[0]
        plain = fn("g", f"{name}/guard", a="x", limit="lim")
        plain["retry"] = {"max_attempts": 3}
        slug = await _workflow(platform, [inp("x"), inp("lim"), plain])
        run = await _start(platform, slug, {"x": 5.0, "lim": 0.0})
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        state = run["node_states"]["g"]
        assert (run["status"], state["attempt"], state["attempts"]) == ("failed", 1, [])
        assert state["error"]["kind"] == "user_error"

        later = fn("g", f"{name}/guard", a="x", limit="lim")
        later["retry"] = {"max_attempts": 2, "initial_interval_s": 3, "on": ["user_error"]}
        slug = await _workflow(platform, [inp("x"), inp("lim"), later])
        run = await _start(platform, slug, {"x": 5.0, "lim": 0.0})
        run = await _until(
            platform, run["id"], lambda r: r["node_states"]["g"]["retry_at"] is not None
        )
        state = run["node_states"]["g"]
        assert (run["status"], state["status"], state["attempt"]) == ("running", "pending", 2)
        assert state["job_id"] is None
        first = await _job(platform, state["attempts"][0]["job_id"])
        finished = datetime.fromisoformat(first["finished_at"])
        assert datetime.fromisoformat(state["retry_at"]) - finished == timedelta(seconds=3)
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        second = await _job(platform, run["node_states"]["g"]["job_id"])
        assert datetime.fromisoformat(second["created_at"]) >= finished + timedelta(seconds=3)
        assert (run["status"], run["node_states"]["g"]["attempt"]) == ("failed", 2)

    async def test_the_manifest_default_applies_to_nodes_without_a_policy(
        self, platform: Platform
    ) -> None:
        name = f"ctl-{uuid.uuid4().hex[:8]}"
        functions = {
            **FUNCTIONS,
            "guard": {
                **FUNCTIONS["guard"],
                "retry": {"max_attempts": 2, "initial_interval_s": 0, "on": ["user_error"]},
            },
        }
        await publish(
            platform.client,
            platform.headers("alice"),
            small_body(name, "1.0.0", code=CODE, functions=functions),
        )
        own = fn("own", f"{name}/guard", a="x", limit="lim")
        own["retry"] = {"max_attempts": 1}  # the node's own policy wins
        slug = await _workflow(
            platform, [inp("x"), inp("lim"), fn("g", f"{name}/guard", a="x", limit="lim"), own]
        )
        run = await _start(platform, slug, {"x": 5.0, "lim": 0.0})
        retries = {n["node_key"]: n.get("retry") for n in run["plan_snapshot"]["nodes"]}
        assert retries["g"]["max_attempts"] == 2
        assert retries["own"]["max_attempts"] == 1
        run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert run["status"] == "failed"
        run = await _until(
            platform, run["id"], lambda r: r["node_states"]["g"]["status"] != "pending"
        )
        assert run["node_states"]["own"]["attempt"] == 1

    async def test_an_invalid_manifest_policy_is_refused(self, platform: Platform) -> None:
        functions = {**FUNCTIONS, "inc": {**FUNCTIONS["inc"], "retry": {"max_attempts": 0}}}
        response = await platform.client.post(
            "/packages",
            json=small_body(f"ctl-{uuid.uuid4().hex[:8]}", "1.0.0", code=CODE, functions=functions),
            headers=platform.headers("alice"),
        )
        assert response.status_code == 422, response.text
        assert "retry" in response.text

    async def test_an_invalid_policy_is_refused(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        node = fn("g", f"{name}/inc", x="x")
        node["retry"] = {"max_attempts": 11, "backoff_coefficient": 0.1}
        body = {
            "slug": f"wf-{uuid.uuid4().hex[:8]}",
            "name": "w",
            "graph": {"nodes": [inp("x"), node]},
        }
        response = await platform.client.post(
            "/workflows", json=body, headers=platform.headers("alice")
        )
        assert response.status_code == 422, response.text
        report = response.json()["report"]
        assert [p["node_key"] for p in report["invalid_retry_policies"]] == ["g", "g"]


class TestCacheRefresh:
    async def test_execute_with_refresh_runs_and_stores(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        path = f"/packages/{name}/functions/inc/execute"
        alice = platform.headers("alice")

        async def hit(**params: str) -> bool:
            response = await platform.client.post(
                path, json={"inputs": {"x": 1.0}}, params=params, headers=alice
            )
            assert response.status_code == 200, response.text
            return bool((await _job(platform, response.json()["job_id"]))["cache_hit"])

        assert await hit() is False
        assert await hit() is True
        assert await hit(cache="refresh") is False  # ran again
        assert await hit() is True  # and stored
        bogus = await platform.client.post(
            path, json={"inputs": {"x": 1.0}}, params={"cache": "never"}, headers=alice
        )
        assert bogus.status_code == 422

    async def test_run_with_refresh_is_never_answered_from_the_cache(
        self, platform: Platform
    ) -> None:
        name = (await _package(platform)).split("|")[0]
        slug = await _workflow(platform, [inp("x"), fn("i", f"{name}/inc", x="x")])
        hits = []
        for refresh in (False, False, True):
            extra = {"cache": "refresh"} if refresh else {}
            run = await _start(platform, slug, {"x": 7.0}, **extra)
            run = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
            assert run["status"] == "completed"
            hits.append((await _job(platform, run["node_states"]["i"]["job_id"]))["cache_hit"])
        assert hits == [False, True, False]
        bogus = await platform.client.post(
            f"/workflows/{slug}/runs",
            json={"inputs": {"x": 1.0}, "cache": "stale"},
            headers=platform.headers("alice"),
        )
        assert bogus.status_code == 422


async def _gql(platform: Platform, query: str, user: str = "alice", **variables: Any) -> Any:
    response = await platform.client.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers=platform.headers(user),
    )
    assert response.status_code == 200, response.text
    return response.json()


class TestGraphQL:
    async def test_cancel_rerun_and_cancel_job(self, platform: Platform) -> None:
        run, job_id = await _napping_run(platform)
        cancel = (
            "mutation($id: ID!) { cancelRun(id: $id) { status nodeStates { nodeKey status } } }"
        )
        denied = await _gql(platform, cancel, user="bob", id=run["id"])
        assert denied["errors"][0]["extensions"]["code"] in ("NotFound", "PermissionDenied")
        done = await _gql(platform, cancel, id=run["id"])
        assert done["data"]["cancelRun"]["status"] == "cancelled"
        assert done["data"]["cancelRun"]["nodeStates"] == [{"nodeKey": "n", "status": "cancelled"}]
        again = await _gql(platform, cancel, id=run["id"])
        assert again["errors"][0]["extensions"]["code"] == "Conflict"
        rerun = (
            'mutation($id: ID!, $inputs: JSON) { rerunRun(id: $id, from: "start", '
            "inputs: $inputs) { id rerunOf status nodeStates { nodeKey status reused "
            "attempts retryAt } } }"
        )
        wrong = await _gql(platform, rerun, id=run["id"], inputs={"x": "long"})
        assert wrong["errors"][0]["extensions"]["code"] == "ValidationError"
        second = (await _gql(platform, rerun, id=run["id"], inputs={"x": LONG}))["data"]
        assert second["rerunRun"]["rerunOf"] == run["id"]
        assert second["rerunRun"]["nodeStates"][0]["reused"] is False
        cancelled = await _gql(platform, cancel, id=second["rerunRun"]["id"])
        assert cancelled["data"]["cancelRun"]["status"] == "cancelled"
        finished = await _gql(
            platform, "mutation($id: ID!) { cancelJob(id: $id) { status } }", id=job_id
        )
        assert finished["errors"][0]["extensions"]["code"] == "Conflict"

    async def test_retry_in_the_graph_input(self, platform: Platform) -> None:
        """The node's `retry` through GraphQL's graph input: refused when invalid (the
        validation report's invalid_retry_policies), kept in the version and the run's plan,
        and the run's node states show the attempts."""
        name = (await _package(platform)).split("|")[0]
        guard = fn("g", f"{name}/guard", a="x", limit="lim")
        bad = {"nodes": [inp("x"), inp("lim"), {**guard, "retry": {"max_attempts": 11}}]}
        checked = await _gql(
            platform,
            "query($g: JSON!) { validateWorkflow(graph: $g) { valid report } }",
            g=bad,
        )
        error = checked["errors"][0]
        assert error["extensions"]["code"] == "ValidationError"
        problems = error["extensions"]["report"]["invalid_retry_policies"]
        assert [p["node_key"] for p in problems] == ["g"]
        create = (
            "mutation($s: String!, $g: JSON!) { createWorkflow(slug: $s, name: $s, graph: $g) "
            "{ slug latest { graph } } }"
        )
        slug = f"wf-{uuid.uuid4().hex[:8]}"
        refused = await _gql(platform, create, s=slug, g=bad)
        assert refused["errors"][0]["extensions"]["code"] == "ValidationError"
        assert refused["errors"][0]["extensions"]["report"]["invalid_retry_policies"] == problems
        policy = {"max_attempts": 2, "initial_interval_s": 0, "on": ["user_error"]}
        good = {"nodes": [inp("x"), inp("lim"), {**guard, "retry": policy}]}
        created = await _gql(platform, create, s=slug, g=good)
        assert "errors" not in created, created
        saved = created["data"]["createWorkflow"]["latest"]["graph"]["nodes"]
        assert next(n for n in saved if n["node_key"] == "g")["retry"] == policy
        started = await _gql(
            platform,
            "mutation($w: String!, $i: JSON!) { createWorkflowRun(workflow: $w, inputs: $i) "
            "{ id } }",
            w=slug,
            i={"x": 5.0, "lim": 0.0},
        )
        run_id = started["data"]["createWorkflowRun"]["id"]
        run = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)
        assert run["plan_snapshot"]["nodes"][0]["retry"]["max_attempts"] == 2
        answer = await _gql(
            platform,
            "query($id: ID!) { workflowRun(id: $id) { status nodeStates { nodeKey status "
            "attempt attempts retryAt } } }",
            id=run_id,
        )
        state = answer["data"]["workflowRun"]["nodeStates"][0]
        assert answer["data"]["workflowRun"]["status"] == "failed"
        assert (state["nodeKey"], state["status"], state["attempt"]) == ("g", "failed", 2)
        assert [a["attempt"] for a in state["attempts"]] == [1]
        assert state["retryAt"] is None

    async def test_cancel_job_stops_a_running_job(self, platform: Platform) -> None:
        name = (await _package(platform)).split("|")[0]
        sent = await platform.client.post(
            f"/packages/{name}/functions/nap/execute",
            json={"inputs": {"x": LONG}},
            params={"wait": 0},
            headers=platform.headers("alice"),
        )
        assert sent.status_code == 202, sent.text
        job_id = sent.json()["job_id"]
        await _running_here(platform, job_id)
        cancel = "mutation($id: ID!) { cancelJob(id: $id) { id status error } }"
        denied = await _gql(platform, cancel, user="bob", id=job_id)
        assert denied["errors"][0]["extensions"]["code"] in ("NotFound", "PermissionDenied")
        assert (await _job(platform, job_id))["status"] == "running"
        done = await _gql(platform, cancel, id=job_id)
        assert "errors" not in done, done
        job = done["data"]["cancelJob"]
        assert (job["id"], job["status"], job["error"]["kind"]) == (job_id, "failed", "cancelled")
        await _gone(platform, job_id)
        again = await _gql(platform, cancel, id=job_id)
        assert again["errors"][0]["extensions"]["code"] == "Conflict"
