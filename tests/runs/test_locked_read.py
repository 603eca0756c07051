"""The locked tick's one read (the run row, locked, with its work: `RunRepository.read`) on
PostgreSQL reads the work in the statement's snapshot, which is taken before the lock: what
the lock's last holder wrote meanwhile is not in it. It must come to the next tick, not be
lost: the tick adopts (deletes) only the chain starts it read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest
from sqlalchemy import Table, delete, insert, select, text

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.chains.repository import ChainRepository
from calcgraph.domain.runs.models import ChainStart, WorkflowRun
from calcgraph.domain.runs.repository import RunRepository
from calcgraph.domain.runs.state import StartedJob
from calcgraph.domain.workflows.models import Workflow
from tests.runs.plans import job_row, seed

pytestmark = pytest.mark.db

STARTS = cast(Table, ChainStart.__table__)


@pytest.fixture
async def real_database(database_url: str) -> AsyncIterator[Database]:
    """Sessions of their own connections (the `database` fixture's share one)."""
    database = Database(database_url)
    seeded: list[str] = []
    database.seeded = seeded  # type: ignore[attr-defined]
    try:
        yield database
    finally:
        async with database.write_session() as session:
            for run_id in seeded:
                workflow_id = await session.scalar(
                    select(WorkflowRun.workflow_id).where(WorkflowRun.id == run_id)
                )
                await session.execute(delete(Job).where(Job.workflow_run_id == run_id))
                await session.execute(delete(Workflow).where(Workflow.id == workflow_id))
        await database.dispose()


async def _locked_read(database: Database, run_id: str) -> dict[str, StartedJob]:
    async with database.write_session() as session:
        found = await RunRepository.from_session(session).read(run_id, "wait")
        assert found is not None
        return dict(found.started)


async def _waiting_for_a_lock(database: Database) -> None:
    for _ in range(500):
        async with database.read_session() as session:
            waiting = await session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the locked read never waited for the run's lock")


async def test_a_chain_start_written_while_the_read_waits_is_left_for_the_next_tick(
    real_database: Database, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite's write sessions are serialised: the read is made under the lock")
    database = real_database
    async with database.write_session() as session:
        run = await seed(session, 2, 4)  # chain 0's third node started by its chain worker
    database.seeded.append(run.run_id)  # type: ignore[attr-defined]
    mine = STARTS.c.run_id == run.run_id
    async with database.read_session() as session:
        before = set(await session.scalars(select(STARTS.c.job_id).where(mine)))
    assert len(before) == 1
    async with database.write_session() as holder:
        # A chain worker holds the run's lock and records the next start of chain 1.
        await ChainRepository.from_session(holder).lock_run(run.run_id)
        reading = asyncio.create_task(_locked_read(database, run.run_id))
        await _waiting_for_a_lock(database)
        await holder.execute(text("SET LOCAL session_replication_role = replica"))
        late = job_row(run.run_id, "u", "c1n3", "running")
        await holder.execute(insert(cast(Table, Job.__table__)), [late])
        await holder.execute(insert(STARTS), [{"run_id": run.run_id, "job_id": late["id"]}])
    adopted = await asyncio.wait_for(reading, 30)
    # The read's snapshot predates the holder's commit: it adopted the start it saw...
    assert {job.job_id for job in adopted.values()} == before
    async with database.read_session() as session:
        after = set(await session.scalars(select(STARTS.c.job_id).where(mine)))
    # ...and left the one written while it waited for the next tick (deleting every start of
    # the run, as a read made after the lock could, would lose it).
    assert after == {late["id"]}
    async with database.write_session() as session:
        found = await RunRepository.from_session(session).read(run.run_id, "skip")
    assert found is not None
    assert {job.job_id for job in found.started.values()} == {late["id"]}
