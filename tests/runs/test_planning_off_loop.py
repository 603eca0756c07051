"""Contract 8b: a huge workflow is parsed and planned on a thread, not on the event loop that
answers `/health` and every other caller meanwhile; a small one is planned in place (a thread
hop would cost each ordinary run more than its plan). Either way the run is the same."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select

from calcgraph.db.engine import Database
from calcgraph.domain.runs.create import repository as run_repository
from calcgraph.domain.runs.create import service as create_service
from calcgraph.domain.runs.models import WorkflowRun
from tests.packages.publishing import small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

Headers = Callable[..., dict[str, str]]


@pytest.fixture
def planned_on(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(nodes, planned on the event loop's thread) per run created."""
    seen: list[tuple[int, bool]] = []
    planned = create_service.planned_version
    loop_thread = threading.get_ident()

    def spying(version: Any, defaults: Any) -> Any:
        seen.append((len(version.graph["nodes"]), threading.get_ident() == loop_thread))
        return planned(version, defaults)

    monkeypatch.setattr(create_service, "planned_version", spying)
    return seen


async def _workflow(
    client: httpx.AsyncClient, headers: dict[str, str], pkg: str, width: int
) -> str:
    slug = f"plan-{uuid.uuid4().hex[:8]}"
    nodes = [inp("x"), *(fn(f"n{i}", f"{pkg}/run", x="x") for i in range(width))]
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    created = await client.post("/workflows", json=body, headers=headers)
    assert created.status_code == 201, created.text
    return slug


async def _start(client: httpx.AsyncClient, headers: dict[str, str], slug: str, x: float) -> Any:
    started = await client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=headers
    )
    assert started.status_code == 201, started.text
    run = await client.get(f"/workflow-runs/{started.json()['id']}", headers=headers)
    assert run.status_code == 200, run.text
    return run.json()


async def _run(client: httpx.AsyncClient, headers: dict[str, str], pkg: str, width: int) -> Any:
    return await _start(client, headers, await _workflow(client, headers, pkg, width), 1)


async def test_a_huge_workflow_is_planned_off_the_event_loop(
    client: httpx.AsyncClient, bearer: Headers, planned_on: list[tuple[int, bool]]
) -> None:
    headers = bearer("alice")
    pkg = f"plan-{uuid.uuid4().hex[:8]}"
    published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
    assert published.status_code == 201, published.text
    width = create_service.OFF_LOOP_NODES + 10
    small = await _run(client, headers, pkg, 3)
    huge = await _run(client, headers, pkg, width)
    assert planned_on == [(4, True), (width + 1, False)]
    for run, count in ((small, 3), (huge, width)):
        assert run["status"] in ("pending", "running")
        keys = set(run["node_states"]) - {"x"}
        assert keys == {f"n{i}" for i in range(count)}


async def _stored_snapshots(database: Database, *run_ids: str) -> list[Any]:
    async with database.read_session() as session:
        rows = await session.execute(
            select(WorkflowRun.id, WorkflowRun.plan_snapshot).where(WorkflowRun.id.in_(run_ids))
        )
        stored = dict(rows.all())
    return [stored[run_id] for run_id in run_ids]


async def test_a_version_is_planned_once_for_all_its_runs(
    client: httpx.AsyncClient,
    bearer: Headers,
    database: Database,
    planned_on: list[tuple[int, bool]],
) -> None:
    """Every run of a version freezes the same plan: the second run of a huge version is not
    planned again (a second of pure work each), and each run is still its own: its inputs,
    its node states, a tick of one leaving the other as it was."""
    headers = bearer("alice")
    pkg = f"plan-{uuid.uuid4().hex[:8]}"
    published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
    assert published.status_code == 201, published.text
    width = create_service.OFF_LOOP_NODES + 10
    slug = await _workflow(client, headers, pkg, width)
    first = await _start(client, headers, slug, 1)
    ticked = await client.post(f"/workflow-runs/{first['id']}/tick", headers=headers)
    assert ticked.status_code == 200, ticked.text[:300]
    second = await _start(client, headers, slug, 2)
    assert planned_on == [(width + 1, False)]
    assert second["id"] != first["id"]
    assert second["plan_snapshot"] == first["plan_snapshot"]
    # Each row stores the snapshot, written as JSON once for the version.
    stored = await _stored_snapshots(database, first["id"], second["id"])
    assert stored == [first["plan_snapshot"]] * 2
    assert (first["inputs"], second["inputs"]) == ({"x": 1}, {"x": 2})
    assert ticked.json()["status"] == "running"
    assert {s["status"] for s in second["node_states"].values()} == {"pending"}
    refused = await client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": "one"}}, headers=headers
    )
    assert refused.status_code == 422, refused.text[:300]
    assert planned_on == [(width + 1, False)]


async def test_a_huge_runs_node_rows_go_in_bounded_statements(
    client: httpx.AsyncClient,
    bearer: Headers,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its node rows are inserted a bounded number per statement, so the event loop serves
    others between them; every row is there."""
    monkeypatch.setattr(run_repository, "NODE_ROWS_PER_STATEMENT", 100)
    inserts: list[int] = []

    def count(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO NODE_STATES"):
            inserts.append(1)

    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        headers = bearer("alice")
        pkg = f"plan-{uuid.uuid4().hex[:8]}"
        published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
        assert published.status_code == 201, published.text
        run = await _run(client, headers, pkg, 450)  # 451 node rows with the input
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
    assert len(set(run["node_states"]) - {"x"}) == 450
    assert len(inserts) >= 5
    assert await _stored_snapshots(database, run["id"]) == [run["plan_snapshot"]]
