"""`POST /workflow-runs/{id}/tick?since=N`: a poller that holds revision N gets only the node
states changed after it (and no plan), so polling a big run costs what changed; merged, the
answers give exactly the node states a full answer gives."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.execution.conftest import Platform
from tests.runs.test_tick_api import TERMINAL, _package, _start, _workflow
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


async def _tick(platform: Platform, run_id: str, **params: Any) -> Any:
    return await platform.client.post(
        f"/workflow-runs/{run_id}/tick", params=params, headers=platform.headers("alice")
    )


async def test_merged_answers_equal_the_full_run(platform: Platform) -> None:
    pkg = await _package(platform)
    slug = await _workflow(
        platform,
        [
            inp("x"),
            fn("A", f"{pkg}/inc", x="x"),
            fn("B", f"{pkg}/inc", x="A.y"),
            fn("C", f"{pkg}/inc", x="x"),
            fn("D", f"{pkg}/add", a="B.y", b="C.y"),
        ],
    )
    created = await _start(platform, slug, {"x": 1})
    run_id, held = created["id"], dict(created["node_states"])
    revision = created["revision"]
    deadline = time.monotonic() + 60
    while True:
        response = await _tick(platform, run_id, since=revision, wait=5)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["since"] == revision
        assert body["plan_snapshot"] == {}
        if body["revision"] == revision:
            assert body["node_states"] == {}  # nothing changed: nothing sent
        held.update(body["node_states"])
        revision = body["revision"]
        if body["status"] in TERMINAL:
            break
        assert time.monotonic() < deadline, body
    assert body["status"] == "completed", body
    full = await platform.client.get(f"/workflow-runs/{run_id}", headers=platform.headers("alice"))
    assert held == full.json()["node_states"]
    assert full.json()["revision"] == revision
    # Every node changed since creation; none since the last answer.
    assert set((await _tick(platform, run_id, since=0)).json()["node_states"]) == set("ABCD")
    assert (await _tick(platform, run_id, since=revision)).json()["node_states"] == {}
    plain = (await _tick(platform, run_id)).json()
    assert "since" not in plain
    assert plain["plan_snapshot"]["chains"]
    assert plain["node_states"] == held


@pytest.mark.parametrize("since", ["-1", "x", "1.5", "99"])
async def test_a_since_the_run_never_had_is_refused(platform: Platform, since: str) -> None:
    pkg = await _package(platform)
    slug = await _workflow(platform, [inp("x"), fn("A", f"{pkg}/inc", x="x")])
    run_id = (await _start(platform, slug, {"x": 1}))["id"]
    response = await _tick(platform, run_id, since=since)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("ValidationError: since must be")
