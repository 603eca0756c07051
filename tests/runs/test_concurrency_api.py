"""Concurrent ticks never submit a node twice: the run row is locked for the tick (FOR UPDATE
on PostgreSQL) and jobs carry a unique (run, node, attempt) key."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS, TERMINAL
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

RUNS = 3
CONCURRENT = 50
WIDTH = 6


async def _wide_workflow(platform: Platform) -> str:
    """A -> B0..B5 -> D: every tick that sees A finish must submit six nodes at once."""
    name = f"conc-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client,
        platform.headers("alice"),
        small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS),
    )
    branches = [fn(f"B{i}", f"{name}/inc", x="A.y") for i in range(WIDTH)]
    join = fn("D", f"{name}/add", a="B0.y", b=f"B{WIDTH - 1}.y")
    nodes = [inp("x"), fn("A", f"{name}/inc", x="x"), *branches, join]
    slug = f"conc-{uuid.uuid4().hex[:8]}"
    response = await platform.client.post(
        "/workflows",
        json={"slug": slug, "name": slug, "graph": {"nodes": nodes}},
        headers=platform.headers("alice"),
    )
    assert response.status_code == 201, response.text
    return slug


async def test_fifty_concurrent_ticks_submit_every_node_once(
    platform: Platform, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("row locks under real concurrency: PostgreSQL (SQLite serialises writers)")
    slug = await _wide_workflow(platform)
    headers = platform.headers("alice")
    run_ids = []
    for _ in range(RUNS):
        created = await platform.client.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
        )
        assert created.status_code == 201
        run_ids.append(created.json()["id"])

    async def tick(run_id: str, wait: float) -> dict[str, Any]:
        response = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": wait}, headers=headers
        )
        assert 200 <= response.status_code < 300, response.text
        body: dict[str, Any] = response.json()
        return body

    finished: dict[str, dict[str, Any]] = {}
    for round_ in range(40):
        answers = await asyncio.gather(
            *(tick(run_ids[i % RUNS], 0 if round_ == 0 else 2) for i in range(CONCURRENT))
        )
        for answer in answers:
            if answer["status"] in TERMINAL:
                finished[answer["id"]] = answer
        if len(finished) == RUNS:
            break
    assert set(finished) == set(run_ids)
    for run in finished.values():
        assert run["status"] == "completed", run
        # D, and the branches D does not read, are the terminal function nodes.
        expected_outputs = {f"B{i}": {"y": 3.0} for i in range(1, WIDTH - 1)}
        assert run["terminal_outputs"] == {"D": {"y": 6.0}, **expected_outputs}

    listing = await platform.client.get("/jobs", params={"limit": 500}, headers=headers)
    submitted = Counter(
        (job["workflow_run_id"], job["node_key"])
        for job in listing.json()["items"]
        if job["workflow_run_id"] in run_ids
    )
    expected = {(r, k) for r in run_ids for k in ["A", "D", *(f"B{i}" for i in range(WIDTH))]}
    assert set(submitted) == expected
    assert set(submitted.values()) == {1}


async def test_concurrent_saves_of_one_workflow(platform: Platform, backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("row locks under real concurrency: PostgreSQL (SQLite serialises writers)")
    slug = await _wide_workflow(platform)
    headers = platform.headers("alice")
    graph = (await platform.client.get(f"/workflows/{slug}", headers=headers)).json()["graph"]
    created = await asyncio.gather(
        *(
            platform.client.post(
                "/workflows",
                json={"slug": f"{slug}-twin", "name": "twin", "graph": graph},
                headers=headers,
            )
            for _ in range(5)
        )
    )
    assert sorted(r.status_code for r in created) == [201, 409, 409, 409, 409]
    saved = await asyncio.gather(
        *(
            platform.client.put(f"/workflows/{slug}", json={"graph": graph}, headers=headers)
            for _ in range(5)
        )
    )
    assert all(r.status_code == 200 for r in saved), [r.text for r in saved]
    assert sorted(r.json()["version"] for r in saved) == [2, 3, 4, 5, 6]
