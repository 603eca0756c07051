"""A tick costs a fixed number of SQL statements, whatever the size of the run: node rows are
read in one statement and written in one executemany, jobs inserted in one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from calcgraph.db.engine import Database
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.service import run_service
from tests.packages.publishing import Bearer, publish, small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


async def _run(client: httpx.AsyncClient, bearer: Bearer, width: int) -> str:
    """`width` independent nodes: the first tick submits all of them."""
    nodes = [inp("x"), *(fn(f"n{i}", "wide/run", x="x") for i in range(width))]
    slug = f"wide-{width}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    response = await client.post("/workflows", json=body, headers=bearer("alice"))
    assert response.status_code == 201, response.text
    created = await client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=bearer("alice")
    )
    run_id: str = created.json()["id"]
    return run_id


class _Counter:
    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, *args: Any) -> None:
        statement = str(args[2]).upper()
        if not statement.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK TO")):
            self.statements.append(statement)


@pytest.fixture
async def counted(database: Database) -> AsyncIterator[_Counter]:
    counter = _Counter()
    event.listen(database.engine.sync_engine, "before_cursor_execute", counter)
    yield counter
    event.remove(database.engine.sync_engine, "before_cursor_execute", counter)


async def test_statements_do_not_grow_with_the_run(
    client: httpx.AsyncClient, bearer: Bearer, counted: _Counter, backend: str
) -> None:
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    counts: dict[int, tuple[int, int]] = {}
    # Width 1 first: it also warms what a process remembers (function owners, plans).
    for width in (1, 2, 40):
        run_id = await _run(client, bearer, width)
        counted.statements.clear()
        submit = await client.post(f"/workflow-runs/{run_id}/tick", headers=bearer("alice"))
        assert submit.status_code == 200
        assert {s["status"] for s in submit.json()["node_states"].values()} == {"running"}
        submitting = len(counted.statements)
        counted.statements.clear()
        idle = await client.post(f"/workflow-runs/{run_id}/tick", headers=bearer("alice"))
        assert idle.json() == submit.json()
        counts[width] = (submitting, len(counted.statements))
    # On PostgreSQL the UPDATE of many submitted nodes is planned for its parameters
    # (`dialect.custom_plans`): a statement before it and one after, which a tick submitting
    # a few nodes (by primary key) does not send.
    around = 2 if backend == "postgresql" else 0
    # There a few changed node rows are written in the run's UPDATE (`WRITE_TICK`), the many
    # submitted ones in their own UPDATE from arrays: one statement more.
    many = around + 1 if backend == "postgresql" else 0
    assert counts[2][0] == counts[40][0] - many <= counts[1][0], counts
    assert counts[1][1] == counts[2][1] == counts[40][1], counts
    submitting, idle_count = counts[40]
    # A run this process created goes to the locked tick without the unlocked read: the run
    # locked with its finished jobs and chain starts (one statement), the owner's execution rights
    # with their queued jobs counted (contract 8b's quota, only when the tick submits), the
    # node rows, the run row, the job rows. On PostgreSQL the many submitted node rows are
    # their own UPDATE, and the rest one statement (`WRITE_TICK` with the jobs' INSERT as a
    # CTE).
    assert submitting == (4 if backend == "postgresql" else 5) + around, counted.statements
    # Nothing finished: the run row and whether a tick has work, in one statement.
    assert idle_count == 1, counted.statements


async def test_an_idle_tick_out_of_memo_reads_what_changed(
    client: httpx.AsyncClient, bearer: Bearer, counted: _Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in the process's memo (a process serving more runs than it remembers), an idle
    tick asked with `since` reads neither the plan nor the run's node states: its statements,
    and what they read, do not grow with the run."""
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    counts = {}
    for width in (2, 40):
        run_id = await _run(client, bearer, width)
        submit = await client.post(f"/workflow-runs/{run_id}/tick", headers=bearer("alice"))
        revision = submit.json()["revision"]
        monkeypatch.setattr(run_service, "memo", RunMemo())
        counted.statements.clear()
        idle = await client.post(
            f"/workflow-runs/{run_id}/tick", params={"since": revision}, headers=bearer("alice")
        )
        assert idle.status_code == 200, idle.text
        assert idle.json()["revision"] == revision
        assert idle.json()["node_states"] == {}
        reads = [s for s in counted.statements if s.startswith("SELECT")]
        assert not [s for s in reads if "PLAN_SNAPSHOT" in s.split("FROM")[0]], reads
        # Node rows only by status (running) or by revision, never the whole run.
        for statement in reads:
            if "FROM NODE_STATES" in statement:
                assert any(
                    condition in statement
                    for condition in (
                        "NODE_STATES.STATUS =",
                        "NODE_STATES.REVISION >",  # SQLite
                        "NODE_STATES.REVISION = ANON_2.VALUE",  # PostgreSQL: per revision
                    )
                ), statement
        counts[width] = len(counted.statements)
    assert counts[2] == counts[40], counts


async def test_a_new_run_ticked_by_another_process_is_read_unlocked_again(
    client: httpx.AsyncClient, bearer: Bearer, counted: _Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that created a run takes its first tick straight to the lock. When another
    process ticked it first, one locked tick here finds that (it changes nothing) and the
    next idle tick reads it unlocked again, not a locked tick each time."""
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    run_id = await _run(client, bearer, 2)
    here = run_service.memo
    monkeypatch.setattr(run_service, "memo", RunMemo())  # another process
    submit = await client.post(f"/workflow-runs/{run_id}/tick", headers=bearer("alice"))
    revision = submit.json()["revision"]
    assert revision == 1
    monkeypatch.setattr(run_service, "memo", here)
    ticks = []
    for _ in range(3):
        counted.statements.clear()
        idle = await client.post(
            f"/workflow-runs/{run_id}/tick", params={"since": revision}, headers=bearer("alice")
        )
        assert idle.status_code == 200, idle.text
        assert (idle.json()["revision"], idle.json()["node_states"]) == (revision, {})
        ticks.append(list(counted.statements))
    assert any("FROM CHAIN_STARTS" in s for s in ticks[0]), ticks[0]  # the locked tick
    # It changed nothing: its answer is kept under the run's change token, and the next
    # ticks, the token unchanged, are answered without a statement.
    assert [len(t) for t in ticks[1:]] == [0, 0], ticks
