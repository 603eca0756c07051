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


async def _reads_around_a_commit(database: Database, *, snapshot: bool) -> tuple[int, int]:
    """A value read, a change committed by another unit of work, the value read again."""
    async with database.read_session(snapshot=snapshot) as session:
        before = int(await session.scalar(text("SELECT n FROM snapshot_probe")) or 0)
        async with database.write_session() as writer:
            await writer.execute(text("UPDATE snapshot_probe SET n = n + 1"))
        after = int(await session.scalar(text("SELECT n FROM snapshot_probe")) or 0)
    return before, after


async def test_a_snapshot_read_does_not_see_a_commit_made_between_its_reads(
    database_url: str,
) -> None:
    """A use case marked `one_snapshot` (the deployment state) reads one committed state: on
    PostgreSQL a plain read session sees each commit as soon as it lands (a canary judged
    between two reads showed the promotion in the history and the old version as current)."""
    database = Database(database_url)
    try:
        async with database.write_session() as session:
            await session.execute(text("DROP TABLE IF EXISTS snapshot_probe"))
            await session.execute(text("CREATE TABLE snapshot_probe (n INTEGER NOT NULL)"))
            await session.execute(text("INSERT INTO snapshot_probe (n) VALUES (0)"))
        before, after = await _reads_around_a_commit(database, snapshot=True)
        assert after == before
        if database.dialect_name == "postgresql":
            before, after = await _reads_around_a_commit(database, snapshot=False)
            assert after == before + 1
            async with database.read_session(snapshot=True) as session:
                with pytest.raises(Exception, match="read-only"):
                    await session.execute(text("UPDATE snapshot_probe SET n = 0"))
    finally:
        async with database.write_session() as session:
            await session.execute(text("DROP TABLE IF EXISTS snapshot_probe"))
        await database.dispose()
