"""Reads that need no transaction (an idle tick) skip BEGIN and ROLLBACK on PostgreSQL: each
statement of an autocommit read session is a transaction of its own."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from calcgraph.db.engine import Database

pytestmark = pytest.mark.db


async def _two_transaction_starts(database: Database, *, autocommit: bool) -> tuple[str, str]:
    async with database.read_session(autocommit=autocommit) as session:
        first = str(await session.scalar(text("SELECT now()")))
        await asyncio.sleep(0.01)
        second = str(await session.scalar(text("SELECT now()")))
    return first, second


async def test_autocommit_reads_run_each_statement_alone(database_url: str) -> None:
    database = Database(database_url)
    try:
        if database.dialect_name != "postgresql":
            # SQLite keeps its (local, cheap) read transactions: the flag changes nothing.
            async with database.read_session(autocommit=True) as session:
                assert await session.scalar(text("SELECT 1")) == 1
            return
        # now() is the start of the statement's transaction.
        first, second = await _two_transaction_starts(database, autocommit=True)
        assert first != second
        first, second = await _two_transaction_starts(database, autocommit=False)
        assert first == second
        # The connection goes back to the pool as it was: a plain read is one transaction.
        first, second = await _two_transaction_starts(database, autocommit=False)
        assert first == second
    finally:
        await database.dispose()
