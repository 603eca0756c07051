"""Ticks of one run from several API processes (`calcgraph serve --workers N`, replicas):
each process keeps its own run memo, and none answers a stale state; a tick that finds the
run's lock held (another process ticking it) answers the run as committed instead of queueing
behind it holding a pooled connection.

A second process is a second `RunService` (its own memo) over the same database: the state a
process keeps is in its memo, and ticks reach the database through the same code either way.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from calcgraph.domain.runs.chains.repository import ChainRepository
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.service import RunService
from calcgraph.domain.runs.views import RunView
from tests.execution.conftest import Platform
from tests.runs.test_tick_api import TERMINAL, _package, _start, _tick, _workflow
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db
# Not a measure: a tick that queued behind the held lock would wait forever; this ends it.
HUNG = 60.0


def _diamond(package: str) -> list[dict[str, Any]]:
    return [
        inp("x"),
        fn("A", f"{package}/inc", x="x"),
        fn("B", f"{package}/inc", x="A.y"),
        fn("C", f"{package}/inc", x="A.y"),
        fn("D", f"{package}/add", a="B.y", b="C.y"),
    ]


def _wire_states(view: RunView) -> dict[str, tuple[str, str | None, int]]:
    assert view.node_states is not None
    return {k: (s.status, s.job_id, s.attempt) for k, s in view.node_states.items()}


def _http_states(run: dict[str, Any]) -> dict[str, tuple[str, str | None, int]]:
    return {k: (s["status"], s["job_id"], s["attempt"]) for k, s in run["node_states"].items()}


async def _committed(platform: Platform, run_id: str) -> dict[str, tuple[str, str | None, int]]:
    async with platform.database.read_session() as session:
        states = await RunRepository.from_session(session).states(run_id)
    return {k: (s.status, s.job_id, s.attempt) for k, s in states.items()}


async def test_two_processes_tick_one_run_and_neither_answers_a_stale_state(
    platform: Platform,
) -> None:
    slug = await _workflow(platform, _diamond(await _package(platform)))
    run_id = (await _start(platform, slug, {"x": 1.0}))["id"]
    alice = await platform.user("alice")
    other = RunService()  # the second process: a memo of its own
    cache = platform.execution.service.cache

    async def tick_elsewhere() -> RunView:
        async with platform.database.write_session() as session:
            return await other.tick(session, alice, run_id, cache)

    # The first process ticks (long-polled, HTTP), then the other, turn by turn: each sees
    # what the other committed, whatever its own memo remembers of an older revision.
    revisions: list[int] = []
    run = await _tick(platform, run_id)
    for _ in range(40):
        assert _http_states(run) == await _committed(platform, run_id)
        view = await tick_elsewhere()
        assert view.revision >= run["revision"]
        assert _wire_states(view) == await _committed(platform, run_id)
        revisions += [run["revision"], view.revision]
        if view.status in TERMINAL:
            break
        run = await _tick(platform, run_id, wait=5)
        assert run["revision"] >= view.revision
    assert view.status == "completed", view
    assert view.terminal_outputs == {"D": {"y": 6.0}}
    assert revisions == sorted(revisions)
    # Both processes moved it: neither was only reading.
    assert len(set(revisions)) > 2
    # Each node ran once, whichever process submitted it.
    listing = await platform.client.get(
        "/jobs", params={"limit": 100}, headers=platform.headers("alice")
    )
    nodes = [j["node_key"] for j in listing.json()["items"] if j["workflow_run_id"] == run_id]
    assert sorted(nodes) == ["A", "B", "C", "D"]
    # The first process, asked again, answers the end too (its memo held revision 1 or so).
    final = await _tick(platform, run_id)
    assert final["status"] == "completed"
    assert final["revision"] == view.revision


async def test_a_tick_finding_the_run_locked_answers_it_as_committed(
    platform: Platform, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("row locks: PostgreSQL (SQLite's write sessions are serialised whole)")
    slug = await _workflow(platform, _diamond(await _package(platform)))
    run_id = (await _start(platform, slug, {"x": 1.0}))["id"]
    async with platform.database.write_session() as session:
        # Another unit of work (a tick elsewhere) holds the run's lock until it commits.
        await ChainRepository.from_session(session).lock_run(run_id)
        busy = await asyncio.wait_for(_tick(platform, run_id), HUNG)
        # Answered at once, as committed: nothing submitted, nothing written.
        assert busy["status"] == "pending"
        assert busy["revision"] == 0
        assert {s["status"] for s in busy["node_states"].values()} == {"pending"}
        since = await asyncio.wait_for(
            platform.client.post(
                f"/workflow-runs/{run_id}/tick",
                params={"since": 0},
                headers=platform.headers("alice"),
            ),
            HUNG,
        )
        assert since.status_code == 200, since.text
        assert since.json()["node_states"] == {}
    # The lock is free: the next tick advances the run.
    ticked = await _tick(platform, run_id)
    assert ticked["revision"] == 1
    assert ticked["node_states"]["A"]["status"] in ("running", "success")
    listing = await platform.client.get(
        "/jobs", params={"limit": 100}, headers=platform.headers("alice")
    )
    nodes = [j["node_key"] for j in listing.json()["items"] if j["workflow_run_id"] == run_id]
    assert nodes == ["A"]
