"""The tick reads its run as a `RunRow` of Core columns, not as an ORM entity: each of its
three reads answers every column but the plan, as the row holds it."""

from __future__ import annotations

from dataclasses import fields

import httpx
import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.snapshot import WorkflowFacts
from calcgraph.domain.runs.statements import repository as queries
from calcgraph.domain.runs.views import RunRow
from tests.packages.publishing import Bearer, publish, small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db


def test_a_run_row_is_every_column_but_the_plan_in_the_tables_order() -> None:
    # Not the values' sizes either: generated columns, read by the run listing only; then
    # whether the terminal outputs were held (`RunRow.terminal_outputs_held`).
    columns = [c.key for c in queries.RUNS.c if c.key != "plan_snapshot" and c.computed is None]
    columns.append("terminal_outputs_held")
    assert [f.name for f in fields(RunRow)] == columns
    assert [c.key for c in queries.RUN_COLUMNS] == columns


async def test_each_read_of_the_tick_answers_the_row(
    client: httpx.AsyncClient, bearer: Bearer, database: Database
) -> None:
    await publish(client, bearer("alice"), small_body("row", "1.0.0"))
    body = {"slug": "row", "name": "row", "graph": {"nodes": [inp("x"), fn("n", "row/run", x="x")]}}
    assert (await client.post("/workflows", json=body, headers=bearer("alice"))).status_code == 201
    created = await client.post(
        "/workflows/row/runs", json={"inputs": {"x": 1}}, headers=bearer("alice")
    )
    run_id = created.json()["id"]
    ticked = await client.post(f"/workflow-runs/{run_id}/tick", headers=bearer("alice"))
    assert ticked.json()["revision"] == 1
    async with database.write_session() as session:
        stored = await session.get(WorkflowRun, run_id)
        assert stored is not None
        expected = RunRow(
            **{f.name: getattr(stored, f.name) for f in fields(RunRow)[:-1]},
            terminal_outputs_held=False,
        )
        runs = RunRepository.from_session(session)
        unlocked = await runs.read(run_id)
        with_work = await runs.read(run_id, work=True)
        locked = await runs.read(run_id, "skip")
    assert unlocked is not None
    assert with_work is not None
    assert locked is not None
    facts = unlocked.facts
    assert facts == WorkflowFacts(facts.owner_id, None, facts.visibility, "row")
    assert (unlocked.run, unlocked.locked) == (expected, False)
    assert (with_work.run, with_work.facts, with_work.work) == (expected, facts, False)
    assert (locked.run, locked.facts, locked.locked) == (expected, facts, True)
    assert (locked.results, locked.started) == ({}, {})
