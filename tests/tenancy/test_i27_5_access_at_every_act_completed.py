"""Issue 27, point 5: access at every act, completed (contract section 8b).

- A worker starting a queued job checks that its owner may still execute the function version:
  bob's jobs, queued while he was a member of the organization, fail `permission_denied` once
  he was removed, and never run.
- A tick reconciling a job that finished after its owner lost the right fails the node with
  `permission_denied` and copies none of its outputs into the run (`terminal_outputs`).

Real workers and sandboxes over a committed database, on both databases.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from tests.execution.conftest import Platform
from tests.runs.test_tick_api import TERMINAL, _status
from tests.tenancy.test_hole3_access_at_every_act import (  # noqa: F401  (fixtures)
    ADMIN,
    _package,
    _set_visibility,
    _start,
    _tick,
    exec_url,
    node_platform,
)
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


async def _job(platform: Platform, job_id: str) -> dict[str, Any]:
    response = await platform.client.get(
        f"/jobs/{job_id}", headers=platform.headers("admin", ADMIN)
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _finished(platform: Platform, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        job = await _job(platform, job_id)
        if job["status"] in ("success", "failed"):
            return job
        assert time.monotonic() < deadline, f"the job did not finish: {job}"
        await asyncio.sleep(0.05)


class TestAWorkerStartingAQueuedJobChecksTheOwnerNow:
    async def test_jobs_queued_before_the_owner_left_the_organization_never_run(
        self,
        node_platform: Platform,  # noqa: F811  (the fixture imported above)
    ) -> None:
        platform = node_platform
        headers = platform.headers
        slug = f"org-{uuid.uuid4().hex[:8]}"
        await platform.client.get("/packages", headers=headers("bob"))  # bob exists
        created = await platform.client.post(
            "/organizations", json={"slug": slug, "name": slug}, headers=headers("alice")
        )
        assert created.status_code == 201, created.text
        added = await platform.client.post(
            f"/organizations/{slug}/members",
            json={"username": "bob", "role": "member"},
            headers=headers("alice"),
        )
        assert added.status_code == 201, added.text
        internal, _ = await _package(platform, "alice", "internal", organization=slug)
        path = f"/packages/{internal}/functions/inc/execute"
        worker = platform.execution.worker
        assert worker is not None
        await asyncio.to_thread(worker.pause)
        try:
            jobs = []
            for x in range(3):
                response = await platform.execute(path, {"x": x}, wait=0, headers=headers("bob"))
                assert response.status_code in (200, 202), response.text
                assert response.json()["status"] == "queued", response.text
                jobs.append(response.json()["job_id"])
            removed = await platform.client.delete(
                f"/organizations/{slug}/members/bob", headers=headers("alice")
            )
            assert removed.status_code == 204, removed.text
        finally:
            await asyncio.to_thread(worker.resume)

        for job_id in jobs:
            job = await _finished(platform, job_id)
            assert job["status"] == "failed", job
            assert job["error"]["kind"] == "permission_denied", job
            assert job["outputs"] is None
            assert not job["logs"]  # never ran

        # A member's queued job still runs: the check refuses only a lost right.
        response = await platform.execute(path, {"x": 1}, wait=20, headers=headers("alice"))
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "success", response.text


class TestATickReconcilingAJobOfALostRight:
    async def test_the_node_fails_and_none_of_its_outputs_reach_the_run(
        self,
        node_platform: Platform,  # noqa: F811  (the fixture imported above)
    ) -> None:
        platform = node_platform
        bobs, bobs_id = await _package(platform, "bob", "public")
        run_id = await _start(platform, [inp("x"), fn("n0", f"{bobs}/inc", x="x")], 1)
        first = await _tick(platform, run_id)
        assert _status(first) == {"n0": "running"}
        job_id = first["node_states"]["n0"]["job_id"]
        # The job finishes while alice may run it; no tick has reconciled it yet.
        assert (await _finished(platform, job_id))["outputs"] == {"y": 2.0}
        await _set_visibility(platform, "bob", bobs_id, "private")

        run = await _tick(platform, run_id)

        assert run["status"] in TERMINAL
        assert run["status"] == "failed", run
        assert run["terminal_outputs"] is None, run
        state = run["node_states"]["n0"]
        assert state["status"] == "failed", state
        assert state["error"]["kind"] == "permission_denied", state
        assert state["outputs"] is None, state
        assert "permission_denied" in run["error_message"]
        # Later ticks keep it so.
        again = await _tick(platform, run_id)
        assert again["terminal_outputs"] is None
        assert again["node_states"]["n0"]["outputs"] is None

    async def test_a_job_reconciled_while_the_right_holds_still_completes(
        self,
        node_platform: Platform,  # noqa: F811  (the fixture imported above)
    ) -> None:
        platform = node_platform
        bobs, _ = await _package(platform, "bob", "public")
        run_id = await _start(platform, [inp("x"), fn("n0", f"{bobs}/inc", x="x")], 1)
        first = await _tick(platform, run_id)
        await _finished(platform, first["node_states"]["n0"]["job_id"])
        run = await _tick(platform, run_id)
        assert run["status"] == "completed", run
        assert run["terminal_outputs"] == {"n0": {"y": 2.0}}
