"""A tick's job rows go in as one INSERT per set of columns (on PostgreSQL from arrays, what
the rows share bound once), and read back exactly as written, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event, select

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.repository import JobRepository
from tests.access.factories import PackageRows, create_package, create_user
from tests.auth.idp import LocalIdentityProvider

pytestmark = pytest.mark.db

NOW = datetime(2026, 11, 23, 12, 0, 0, 123456, tzinfo=UTC)


def _row(rows: PackageRows, user_id: str, inputs: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "created_at": NOW,
        "function_id": rows.function_id,
        "function_version_id": rows.function_version_id,
        "package_id": rows.package_id,
        "user_id": user_id,
        "inputs": inputs,
        "resolved_inputs": inputs,
        "workflow_run_id": None,
        "node_key": None,
        "attempt": 1,
        "status": "queued",
        "cache_hit": False,
        "deliveries": 1,
        "logs": None,
        "started_at": None,
        "finished_at": None,
        **fields,
    }


async def test_rows_read_back_as_written(
    database: Database, identity_provider: LocalIdentityProvider
) -> None:
    alice = await create_user(database, identity_provider, "alice")
    first = await create_package(database, alice, f"p-{uuid.uuid4().hex[:8]}", "private")
    second = await create_package(database, alice, f"p-{uuid.uuid4().hex[:8]}", "private")
    shared = {"x": 1.5, "name": "ünïcode", "nested": {"b": [1, 2], "a": None}}
    queued = [
        _row(first, alice.user_id, shared),
        _row(first, alice.user_id, shared, attempt=2),
        _row(second, alice.user_id, {"x": 2.0}),
        _row(first, alice.user_id, {"x": 3.0}),
    ]
    later = datetime(2026, 11, 23, 12, 0, 1, tzinfo=UTC)
    hits = [  # result-cache hits: the other set of columns (outputs), a second INSERT
        _row(
            second,
            alice.user_id,
            {"x": float(i)},
            status="success",
            cache_hit=True,
            outputs={"y": float(i)},
            logs=f"log {i}",
            deliveries=0,
            started_at=later,
            finished_at=later,
        )
        for i in range(3)
    ]
    alone = [_row(first, alice.user_id, {"x": 9.0}, status="success", outputs={"y": 1}, logs="")]
    inserts: list[str] = []

    def count(*args: Any) -> None:
        if str(args[2]).lstrip().upper().startswith("INSERT INTO JOBS"):
            inserts.append(str(args[2]))

    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        async with database.write_session() as session:
            repository = JobRepository.from_session(session)
            await repository.insert_many([*queued, *hits])
            await repository.insert_many(alone)  # one row: the plain INSERT
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
    assert len(inserts) == 3, inserts
    written = [*queued, *hits, *alone]
    async with database.read_session() as session:
        extra = {
            row.id: (row.attempt, row.deliveries, row.resolved_inputs)
            for row in await session.execute(
                select(Job.id, Job.attempt, Job.deliveries, Job.resolved_inputs)
            )
        }
        views = {
            v.id: v
            for v in await JobRepository.from_session(session).get_views([r["id"] for r in written])
        }
    assert len(views) == len(written)
    for row in written:
        view = views[row["id"]]
        assert (view.function_id, view.function_version_id, view.package_id) == (
            row["function_id"],
            row["function_version_id"],
            row["package_id"],
        )
        assert (view.user_id, view.status, view.cache_hit) == (
            row["user_id"],
            row["status"],
            row["cache_hit"],
        )
        assert view.inputs == row["inputs"]
        assert extra[row["id"]] == (row["attempt"], row["deliveries"], row["resolved_inputs"])
        assert view.outputs == row.get("outputs")
        assert view.logs == row["logs"]
        assert view.created_at == NOW
        assert (view.started_at, view.finished_at) == (row["started_at"], row["finished_at"])
