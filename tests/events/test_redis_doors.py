"""Contract 9's events of builds and of run cancels in the production shape: Redis as the
broker and a separate `calcgraph worker` process (`tests.events.redis_shape`). Builds run in
the API's door and the worker runs what they built; a cancel is the API's write, and the
worker process stops the sandbox of the job it was running.

Each test asserts that the event is recorded exactly once and only with its change (a door
that refuses the change records none, and a refused build writes no version), its
CloudEvents envelope and `data`, that another user does not see it, and that a long-poll
already waiting in the API process is woken by it. Sign-in: test_redis_login."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import OSV_FIXTURE, VULNERABLE, make_wheelhouse
from tests.builds.test_build_api import body as build_body
from tests.builds.test_build_api import pins
from tests.events.redis_shape import cursor, events_since, redis_worker, waiting_poll
from tests.events.test_table import assert_envelope
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_run_control_api import CODE as NAP_CODE
from tests.runs.test_run_control_api import FUNCTIONS as NAP_FUNCTIONS
from tests.runs.test_run_control_api import LONG
from tests.runs.test_tick_api import _until
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

BUILD_KEYS = {"function", "build_id", "status", "reason", "vulnerabilities"}
RUN_KEYS = {"run_id", "workflow", "status", "first_failed_node_key", "terminal_outputs"}
JOB_KEYS = {"job_id", "status", "error", "run_id", "node_key"}


@pytest.fixture
async def building(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    """Builds from local wheels, scanned against the OSV fixture, into a build folder the
    worker process runs the built artifacts from."""
    async with redis_worker(
        exec_url,
        identity_provider,
        tmp_path,
        scanner="osv",
        advisory_db_path=OSV_FIXTURE,
        build_dir=tmp_path / "builds",
        build_no_index=True,
        build_find_links=[str(make_wheelhouse(tmp_path / "wheels"))],
        build_timeout_seconds=120.0,
    ) as platform:
        yield platform


async def _submit(
    platform: Platform, user: str, name: str, **kw: Any
) -> tuple[dict[str, Any], float]:
    response = await platform.client.post(
        "/functions", json=build_body(name, **kw), headers=platform.headers(user)
    )
    body: dict[str, Any] = response.json()
    body["status_code"] = response.status_code
    return body, time.monotonic()


async def test_build_events_with_a_worker_process(building: Platform) -> None:
    platform = building
    alice, bob = platform.headers("alice"), platform.headers("bob")
    admin = platform.headers("root", roles=("admin", "user"))
    for user, roles in (("alice", ("user",)), ("bob", ("user",)), ("root", ("admin", "user"))):
        await create_user(platform.database, platform.idp, user, roles)
    name = f"evb-{uuid.uuid4().hex[:8]}"
    start = await cursor(platform, admin)

    # Ready: recorded with the upload of its files; the worker process runs what it built.
    poll = await waiting_poll(platform, alice, type="calcgraph.build.*")
    ready, answered = await _submit(platform, "alice", name)
    assert ready["status_code"] == 201, ready
    function_id = ready["function_id"]
    woke = await poll.answer(answered)
    assert [(e["type"], e["subject"]) for e in woke] == [("calcgraph.build.ready", function_id)]
    assert_envelope(woke[0], "calcgraph.build.ready", function_id, BUILD_KEYS)
    assert woke[0]["data"] == {
        "function": function_id,
        "build_id": ready["build_id"],
        "status": "ready",
        "reason": None,
        "vulnerabilities": {"critical": 0, "high": 0, "warnings": []},
    }
    done = await platform.execute(f"/packages/{name}/functions/{name}/execute", {"x": 3}, 60)
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["outputs"]) == ("success", {"y": 6.0})

    # Refused (a CRITICAL advisory) and failed (a requirement without a wheel): one event
    # each, and no partial write: no new version, no upload.
    outcomes = []
    for requirements, status in ((pins(VULNERABLE), "refused"), (["cgfx-absent==1"], "failed")):
        poll = await waiting_poll(platform, alice, type="calcgraph.build.*")
        refused, answered = await _submit(
            platform, "alice", name, code="def main(x):\n    return {'y': x}\n",
            requirements=requirements,
        )  # fmt: skip
        assert refused["status_code"] == 400, refused
        assert refused["function_id"] == function_id
        woke = await poll.answer(answered)
        assert [(e["type"], e["subject"]) for e in woke] == [
            ("calcgraph.build.refused", function_id)
        ]
        assert_envelope(woke[0], "calcgraph.build.refused", function_id, BUILD_KEYS)
        data = woke[0]["data"]
        assert (data["function"], data["build_id"], data["status"]) == (
            function_id,
            refused["build_id"],
            status,
        )
        assert data["reason"]
        assert bool(data["vulnerabilities"]) is (status == "refused")
        outcomes.append(refused["build_id"])
    detail = (await platform.client.get(f"/functions/{function_id}", headers=alice)).json()
    assert (detail["current_version"], detail["current_version_id"]) == (
        "1.0.0",
        ready["function_version_id"],
    )
    versions = (await platform.client.get(f"/packages/{name}/versions", headers=alice)).json()
    assert [v["version"] for v in versions["versions"]] == ["1.0.0"]

    # Bob may not build into alice's name: refused after his build ran, so its record and
    # its event are not written either (one transaction).
    taken, _ = await _submit(platform, "bob", name)
    assert taken["status_code"] == 403, taken

    # Exactly once each, as an admin (who sees all) reads the log; bob sees none of them.
    every = await events_since(
        platform, admin, start, type=["calcgraph.build.*", "calcgraph.file.*"]
    )
    assert [(e["type"], e["subject"], e["data"].get("build_id")) for e in every] == [
        ("calcgraph.file.uploaded", function_id, None),
        ("calcgraph.build.ready", function_id, ready["build_id"]),
        ("calcgraph.build.refused", function_id, outcomes[0]),
        ("calcgraph.build.refused", function_id, outcomes[1]),
    ]
    assert len({e["id"] for e in every}) == len(every)
    mine = await events_since(platform, alice, start, type="calcgraph.build.*")
    assert [e["id"] for e in mine] == [e["id"] for e in every[1:]]
    assert await events_since(platform, bob, start, type="calcgraph.build.*") == []
    assert await events_since(platform, bob, start, subject=function_id) == []


@pytest.fixture
async def napping(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    """A sandbox timeout beyond the napping handler's sleep: only a cancel stops it."""
    async with redis_worker(
        exec_url,
        identity_provider,
        tmp_path,
        sandbox_timeout_seconds=LONG * 2,
        job_cancel_check_seconds=0.5,
    ) as platform:
        yield platform


async def test_run_cancelled_with_a_worker_process(napping: Platform) -> None:
    platform = napping
    alice, bob = platform.headers("alice"), platform.headers("bob")
    await platform.user("alice")
    await platform.user("bob")
    name = f"evc-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client, alice, small_body(name, "1.0.0", code=NAP_CODE, functions=NAP_FUNCTIONS)
    )
    slug = f"evc-{uuid.uuid4().hex[:8]}"
    graph = {"nodes": [inp("x"), fn("n", f"{name}/nap", x="x")]}
    created = await platform.client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=alice
    )
    assert created.status_code == 201, created.text
    start = await cursor(platform, alice)

    # The worker process starts the node's job: its event wakes a poll in this process.
    poll = await waiting_poll(platform, alice, type="calcgraph.calculation.started")
    run = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": LONG}}, headers=alice
    )
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    running = await _until(platform, run_id, lambda r: r["node_states"]["n"]["job_id"])
    job_id = running["node_states"]["n"]["job_id"]
    started = await poll.answer(time.monotonic())
    assert [(e["type"], e["subject"]) for e in started] == [
        ("calcgraph.calculation.started", job_id)
    ]

    # The cancel: its events wake alice's poll, not bob's.
    poll = await waiting_poll(platform, alice, type=["calcgraph.run.*", "calcgraph.job.*"])
    bobs = asyncio.create_task(
        platform.client.get("/events", params={"after": "now", "wait": 5}, headers=bob)
    )
    cancelled = await platform.client.post(f"/workflow-runs/{run_id}/cancel", headers=alice)
    answered = time.monotonic()
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    woke = await poll.answer(answered)
    assert [(e["type"], e["subject"]) for e in woke] == [
        ("calcgraph.run.cancelled", run_id),
        ("calcgraph.job.failed", job_id),
    ]
    ended, stopped = woke
    assert_envelope(ended, "calcgraph.run.cancelled", run_id, RUN_KEYS)
    assert ended["data"] == {
        "run_id": run_id,
        "workflow": slug,
        "status": "cancelled",
        "first_failed_node_key": None,
        "terminal_outputs": None,
    }
    assert_envelope(stopped, "calcgraph.job.failed", job_id, JOB_KEYS)
    assert stopped["data"]["error"]["kind"] == "cancelled"
    assert (stopped["data"]["run_id"], stopped["data"]["node_key"]) == (run_id, "n")
    seen_by_bob = (await bobs).json()["items"]
    assert not [e for e in seen_by_bob if e["subject"] in (run_id, job_id)]

    # The worker process stops the sandbox (within job_cancel_check_seconds) and records
    # nothing more: the job stays failed `cancelled`, once.
    await asyncio.sleep(3.0)
    job = (await platform.client.get(f"/jobs/{job_id}", headers=alice)).json()
    assert (job["status"], job["error"]["kind"]) == ("failed", "cancelled")
    # A second cancel is refused and records nothing; later ticks change nothing.
    again = await platform.client.post(f"/workflow-runs/{run_id}/cancel", headers=alice)
    assert again.status_code == 409, again.text
    ticked = await platform.client.post(f"/workflow-runs/{run_id}/tick", headers=alice)
    assert ticked.json()["status"] == "cancelled"

    ours = [
        (e["type"], e["subject"])
        for e in await events_since(platform, alice, start)
        if e["subject"] in (run_id, job_id)
    ]
    assert ours == [
        ("calcgraph.run.created", run_id),
        ("calcgraph.calculation.started", job_id),
        ("calcgraph.run.cancelled", run_id),
        ("calcgraph.job.failed", job_id),
    ]
    assert not [
        e for e in await events_since(platform, bob, start) if e["subject"] in (run_id, job_id)
    ]
