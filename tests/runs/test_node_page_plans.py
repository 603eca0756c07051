"""A page of a run's node states (GraphQL `nodeStates(first: 100)`) reads the page, not the
run, on PostgreSQL, on fresh tables (no statistics) and after ANALYZE.

On fresh tables PostgreSQL took a finished 10,000-node run for 16 rows, read all 10,000
through a bitmap scan and sorted them for the first 100."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text

from calcgraph.db.engine import Database
from calcgraph.domain.runs.nodes.service import node_page_service
from tests.runs.plans import describe, explain, rows_read, seed

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
