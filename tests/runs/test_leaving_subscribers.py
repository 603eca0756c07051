"""A run followed by `runUpdates` subscribers that come and go, the run page's way (each page
closed after its first update), runs to completion with the in-process workers: no tick is
cut halfway, and no writer (API, job claims, heartbeat, sweeper) meets a locked database.

On SQLite the loop used to be cancelled mid-tick when its last subscriber left: its write
transaction was abandoned with the database's write lock, and everything else waited for its
busy timeout, then failed with "database is locked" (the web_run_page benchmark)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from calcgraph.services import services_of
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS, TERMINAL
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

CHAINS, LENGTH = 4, 8


@pytest.fixture
async def node_platform(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    """One job per node (as the benchmark runs), so a run takes many ticks."""
    async with running_platform(
        exec_url, identity_provider, tmp_path, default_sandbox(), chain_execution="node"
    ) as platform:
        yield platform


async def _chains_run(platform: Platform) -> str:
    pkg = f"leave-{uuid.uuid4().hex[:8]}"
    headers = platform.headers("alice")
    await publish(
        platform.client, headers, small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS)
    )
    nodes = [inp("x")]
    for c in range(CHAINS):
        nodes += [
            fn(f"c{c}_{i}", f"{pkg}/inc", x="x" if i == 0 else f"c{c}_{i - 1}.y")
            for i in range(LENGTH)
        ]
    slug = f"leave-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    assert (await platform.client.post("/workflows", json=body, headers=headers)).status_code == 201
    started = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 0}}, headers=headers
    )
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    return run_id


async def _read(platform: Platform, run_id: str) -> dict[str, Any]:
    answer = await platform.client.get(
        f"/workflow-runs/{run_id}", headers=platform.headers("alice")
    )
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


async def test_subscribers_leaving_mid_tick_leave_the_database_writable(
    node_platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    platform = node_platform
    principal = await platform.user("alice")
    run_id = await _chains_run(platform)
    execution = services_of(platform.app).execution
    caplog.set_level(logging.WARNING)
    deadline = time.monotonic() + 120
    steps = 0
    status = "running"
    while status not in TERMINAL:
        assert time.monotonic() < deadline, f"the run did not end: {status}"
        async with execution.follow(principal, run_id, interval=0.05) as updates:
            # Leave after a varying number of the event loop's turns: at every point of the
            # loop's tick (its BEGIN, its reads, its writes, its commit) in turn.
            for _ in range(steps % 40):
                await asyncio.sleep(0)
            steps += 1
            if steps % 5 == 0:  # now and then, stay for an update, as a page does
                view = await asyncio.wait_for(updates.get(), 30)
                status = view.status if view is not None else status
        if steps % 5 == 0:
            continue
        status = (await _read(platform, run_id))["status"]

    run = await _read(platform, run_id)
    assert run["status"] == "completed", run
    assert {state["status"] for state in run["node_states"].values()} == {"success"}
    assert run["node_states"][f"c0_{LENGTH - 1}"]["outputs"] == {"y": LENGTH}
    # Nothing went wrong on the way: no tick, claim, finish, heartbeat or sweep failed.
    assert "database is locked" not in caplog.text
    errors = [
        (r.getMessage(), r.exc_text or (repr(r.exc_info[1]) if r.exc_info else ""))
        for r in caplog.records
        if r.levelno >= logging.ERROR
    ]
    assert not errors
