"""A page of a run's node states (GraphQL `nodeStates(first: 100)`) reads the page, not the
run, on PostgreSQL, on fresh tables (no statistics) and after ANALYZE.

On fresh tables PostgreSQL took a finished 10,000-node run for 16 rows, read all 10,000
through a bitmap scan and sorted them for the first 100."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.runs.nodes.service import node_page_service
from tests.runs.plans import describe, explain, explain_generic, nodes, rows_read, seed

pytestmark = pytest.mark.db


@pytest.mark.parametrize("statistics", [False, True], ids=["fresh", "analyzed"])
async def test_a_page_reads_the_page(database: Database, backend: str, statistics: bool) -> None:
    if backend != "postgresql":
        pytest.skip("plans are PostgreSQL's (SQLite has one way to read a key)")
    async with database.write_session() as session:
        await seed(session, 10, 10, done=10)  # another run around
        big = await seed(session, 100, 100, done=100)
        if statistics:
            await session.execute(text("ANALYZE node_states"))
        sent: list[tuple[str, Any]] = []

        def record(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
            if "FROM node_states" in statement:
                sent.append((statement, parameters))

        engine = session.bind.sync_engine if session.bind is not None else None
        assert engine is not None
        event.listen(engine, "before_cursor_execute", record)
        try:
            for after in (None, "c50n5"):
                pages = await node_page_service.pages(
                    session, [big.run_id], after=after, first=100, statuses=()
                )
                assert len(pages[big.run_id]) == 100
        finally:
            event.remove(engine, "before_cursor_execute", record)
        assert len(sent) == 2
        for statement, parameters in sent:
            plan = await explain(session, statement, parameters)
            assert rows_read(plan) <= 101, f"{statement}\n{describe(plan)}"
        await session.rollback()


@pytest.mark.parametrize("statistics", ["fresh", "stale", "analyzed"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
async def test_the_jobs_of_a_page_are_read_by_key(
    database: Database, backend: str, statistics: str, generic: bool
) -> None:
    """The jobs of a page's nodes (`nodeStates(first: 100) { job { ... } }`) are read one
    primary key probe each, also by the generic plan PostgreSQL keeps for asyncpg's cached
    statement on statistics taken when the caller had few jobs: with the caller's visibility
    inside the probe, that plan read each key through (user_id, created_at), every job of the
    caller for every key (25-37 ms a page at 10,000 nodes)."""
    if backend != "postgresql":
        pytest.skip("plans are PostgreSQL's (SQLite has one way to read a key)")
    async with database.write_session() as session:
        small = await seed(session, 10, 10, done=10)
        if statistics == "stale":
            await session.execute(text("ANALYZE jobs, packages"))
        big = await seed(session, 100, 100, done=100)
        # One caller owning both runs' jobs, as one user's runs do.
        owner = await session.scalar(
            text("SELECT user_id FROM workflow_runs WHERE id = :id"), {"id": big.run_id}
        )
        await session.execute(
            text("UPDATE jobs SET user_id = :owner WHERE workflow_run_id = :small"),
            {"owner": owner, "small": small.run_id},
        )
        if statistics == "analyzed":
            await session.execute(text("ANALYZE jobs, packages"))
        ids = list(
            await session.scalars(
                text(
                    "SELECT job_id FROM node_states WHERE run_id = :id ORDER BY node_key LIMIT 100"
                ),
                {"id": big.run_id},
            )
        )
        principal = Principal(str(owner), "subject", "owner", frozenset())
        sent: list[tuple[str, Any]] = []

        def record(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
            sent.append((statement, parameters))

        engine = session.bind.sync_engine if session.bind is not None else None
        assert engine is not None
        event.listen(engine, "before_cursor_execute", record)
        try:
            await JobRepository.from_session(session).visible_fields_by_id(
                principal, ids, ("id", "status", "finished_at")
            )
        finally:
            event.remove(engine, "before_cursor_execute", record)
        ((statement, parameters),) = sent
        if generic:
            plan = await explain_generic(session, statement, parameters)
        else:
            plan = await explain(session, statement, parameters)
        jobs_read = sum(
            int((n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"])
            for n in nodes(plan)
            if n.get("Relation Name") == "jobs"
        )
        assert jobs_read <= len(ids), f"{statement}\n{describe(plan)}"
        await session.rollback()
