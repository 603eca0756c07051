"""A 10,000-node run (100 chains of 100) runs to completion on PostgreSQL after ANALYZE, with
the in-process workers and the process sandbox, polled the way a client polls a big run
(`?wait=` and `?since=`).

Before issue 14 such a run ended `failed` here: after ANALYZE, a tick's probe for started
jobs looped 3,268 times over 9,999 node rows, held the run's lock for 9.6 s, and the workers
waiting on that lock lost their jobs to the sweeper. Its speed is measured in
`bench/bench_scale_tick.py`, not here."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from calcgraph.db.engine import Database
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import quick_sandbox, running_platform
from tests.packages.publishing import publish, small_body
from tests.runs import plans

pytestmark = [pytest.mark.db, pytest.mark.scale]

CODE = """
def inc(x):
    return {"y": x + 1}
"""
FUNCTIONS = {
    "inc": {
        "handler": "main:inc",
        "inputs": {"x": {"type": "Float", "required": True}},
        "outputs": {"y": {"type": "Float"}},
    }
}
CHAINS, LENGTH = 100, 100


def chains_graph(pkg: str) -> list[dict[str, Any]]:
    def fn(key: str, source: str | None) -> dict[str, Any]:
        binding = (
            {"source": "input_node", "input_key": "x", "from_port": "value"}
            if source is None
            else {"source": "edge", "from_node_key": source, "from_port": "y"}
        )
        return {
            "node_key": key,
            "kind": "function",
            "function": f"{pkg}/inc",
            "input_bindings": {"x": binding},
        }

    nodes = [{"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}]
    for c in range(CHAINS):
        nodes += [fn(f"c{c}n{i}", None if i == 0 else f"c{c}n{i - 1}") for i in range(LENGTH)]
    return nodes


async def _analyzed_with_history(url: str) -> None:
    """Tables that hold a finished 10,000-node run, analyzed: the statistics of a database in
    use, under which the old probe chose its bad plan."""
    database = Database(url)
    try:
        async with database.write_session() as session:
            await plans.seed(session, CHAINS, LENGTH, done=LENGTH)
        async with database.write_session() as session:
            await session.execute(text("ANALYZE"))
    finally:
        await database.dispose()


async def test_a_10000_node_run_completes_after_analyze(
    backend: str, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> None:
    if backend != "postgresql":
        pytest.skip("the scale run is PostgreSQL's (the issue's setup)")
    await _analyzed_with_history(exec_url)
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        quick_sandbox(),
        inprocess_worker_threads=4,
        sweeper_interval_seconds=5,
    ) as platform:
        headers = platform.headers("alice")
        name = f"scale-{uuid.uuid4().hex[:8]}"
        body = small_body(name, "1.0.0", code=CODE, functions=FUNCTIONS)
        await publish(platform.client, headers, body)
        slug = f"scale-{uuid.uuid4().hex[:8]}"
        graph = {"nodes": chains_graph(name)}
        created = await platform.client.post(
            "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
        )
        assert created.status_code == 201, created.text[:2000]
        started = await platform.client.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": 0}}, headers=headers
        )
        assert started.status_code == 201, started.text[:2000]
        run: dict[str, Any] = started.json()
        states = dict(run["node_states"])
        deadline = time.monotonic() + 300
        while run["status"] not in ("completed", "failed", "cancelled"):
            assert time.monotonic() < deadline, f"run stalled at revision {run['revision']}"
            response = await platform.client.post(
                f"/workflow-runs/{run['id']}/tick",
                params={"wait": 5, "since": run["revision"]},
                headers=headers,
                timeout=60,
            )
            assert response.status_code == 200, response.text[:2000]
            run = response.json()
            states.update(run["node_states"])
        assert run["status"] == "completed", run["error_message"]
        assert len(states) == CHAINS * LENGTH
        assert {s["status"] for s in states.values()} == {"success"}
        # Each chain adds 1 per node to x = 0: its last node outputs the chain's length.
        assert run["terminal_outputs"] == {
            f"c{c}n{LENGTH - 1}": {"y": float(LENGTH)} for c in range(CHAINS)
        }
