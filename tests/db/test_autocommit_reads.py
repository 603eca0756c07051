"""Read sessions skip BEGIN and ROLLBACK on PostgreSQL: each statement is a transaction of its
own, unless the reads ask for one transaction (a node page's SET LOCAL)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from calcgraph.db.engine import Database

pytestmark = pytest.mark.db


async def _two_transaction_starts(database: Database, *, one_transaction: bool) -> tuple[str, str]:
    async with database.read_session(one_transaction=one_transaction) as session:
        first = str(await session.scalar(text("SELECT now()")))
        await asyncio.sleep(0.01)
        second = str(await session.scalar(text("SELECT now()")))
    return first, second


async def test_reads_run_each_statement_alone_unless_asked(database_url: str) -> None:
    database = Database(database_url)
    try:
        if database.dialect_name != "postgresql":
            # SQLite keeps its (local, cheap) read transactions: the flag changes nothing.
            async with database.read_session() as session:
                assert await session.scalar(text("SELECT 1")) == 1
            return
        # now() is the start of the statement's transaction.
        first, second = await _two_transaction_starts(database, one_transaction=False)
        assert first != second
        first, second = await _two_transaction_starts(database, one_transaction=True)
        assert first == second
        # The pooled connection goes back as it was after either kind.
        first, second = await _two_transaction_starts(database, one_transaction=False)
        assert first != second
    finally:
        await database.dispose()
