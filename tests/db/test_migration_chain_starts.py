"""Migration 0002 lists the jobs chain workers started before it and no tick adopted yet, so
a run in flight across the upgrade adopts them instead of submitting those nodes again (the
(run, node, attempt) key would refuse that tick)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from sqlalchemy import text

from calcgraph.db.engine import Database
from calcgraph.migrations.runner import upgrade


async def test_started_jobs_of_pending_nodes_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "upgrade.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await upgrade(database, "0001")
        # The stdlib driver, whose connections do not check foreign keys: the rows they
        # point at do not matter here.
        with contextlib.closing(sqlite3.connect(path)) as raw, raw:
            raw.execute(
                "INSERT INTO workflow_runs (id, workflow_id, workflow_version_id, user_id, "
                "status, inputs, resolved_inputs, plan_snapshot, revision, started_at) VALUES "
                "('r', 'w', 'wv', 'u', 'running', '{}', '{}', '{}', 3, '2026-01-01 00:00:00')"
            )
            raw.executemany(
                "INSERT INTO node_states (run_id, node_key, kind, status, attempt) "
                "VALUES ('r', ?, 'function', ?, ?)",
                [("a", "success", 1), ("b", "pending", 0), ("c", "pending", 0)],
            )
            # a: its own finished job; b: a job a chain worker started (attempt 1); c: none.
            raw.executemany(
                "INSERT INTO jobs (id, function_id, function_version_id, package_id, user_id, "
                "status, inputs, resolved_inputs, cache_hit, workflow_run_id, node_key, "
                "attempt, deliveries, created_at) VALUES (?, 'f', 'fv', 'p', 'u', 'running', "
                "'{}', '{}', 0, 'r', ?, 1, 1, '2026-01-01 00:00:00')",
                [("ja", "a"), ("jb", "b")],
            )
        # To the revision under test: a later one rebuilds the jobs table (SQLite's way to drop
        # a constraint), whose copy checks the keys these rows leave dangling.
        await upgrade(database, "0003")
        async with database.read_session() as session:
            listed = (await session.execute(text("SELECT run_id, job_id FROM chain_starts"))).all()
            revisions = set((await session.scalars(text("SELECT revision FROM node_states"))).all())
    finally:
        await database.dispose()
    assert [tuple(row) for row in listed] == [("r", "jb")]
    assert revisions == {0}
