"""On PostgreSQL a worker unit's last statement makes its last job transition and writes the
unit's held events with their positions (`EventRepository.insert_numbered`'s work): one
statement per unit instead of two. The transition is a data-modifying CTE; the events it adds
are built in SQL from what the transition returned, so a transition that took no effect
writes no event (`numbered_with`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, String, Text, bindparam, column, select, table, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY

from calcgraph.db.base import JSONType, UTCDateTime, new_id
from calcgraph.domain.access.repository import with_execution_facts
from calcgraph.domain.events.numbered.repository import (
    NUMBERED_BINDS,
    numbered_params,
    numbered_with,
)
from calcgraph.domain.jobs.store.repository import (
    ClaimedRow,
    Finish,
    JobStoreRepository,
    claimed_row,
)
from calcgraph.domain.runs import changes

# PostgreSQL: a unit's last finish and its events in one statement (`finish_numbered`): the
# guarded UPDATE as a CTE, the job's end event built from what it returned (none when it
# changed no row), written with the unit's held events at the next positions.
_FINISHED_SET = {
    "success": "status = 'success', outputs = :outputs, error = NULL",
    "failed": "status = 'failed', outputs = NULL, error = :error",
}
_ENDED_EVENT = """
    SELECT :e_id, :e_type, :job_id, 'job', :e_recorded,
        CAST(:e_data AS JSONB)
            || jsonb_build_object('run_id', f.workflow_run_id, 'node_key', f.node_key),
        f.workflow_run_id, :e_slot
    FROM finished AS f
"""


def _finish_numbered(status: str) -> Any:
    source = f"""finished AS (
        UPDATE jobs SET {_FINISHED_SET[status]}, logs = :logs, finished_at = :now
        WHERE id = :job_id AND status = 'running' AND lease = :b_lease
        RETURNING workflow_run_id, node_key
    )"""
    return text(
        numbered_with(source, _ENDED_EVENT, "SELECT workflow_run_id, node_key FROM finished")
    ).bindparams(
        *NUMBERED_BINDS,
        bindparam("outputs" if status == "success" else "error", type_=JSONType),
        bindparam("logs", type_=Text),
        bindparam("now", type_=UTCDateTime()),
        bindparam("job_id", type_=String),
        bindparam("b_lease", type_=String),
        bindparam("e_id", type_=String),
        bindparam("e_type", type_=String),
        bindparam("e_recorded", type_=DateTime(timezone=True)),
        bindparam("e_data", type_=Text),
        bindparam("e_slot", type_=BigInteger),
    )


_FINISH_NUMBERED = {status: _finish_numbered(status) for status in _FINISHED_SET}

# PostgreSQL: a unit's claims and its events in one statement (`claim_numbered`): the claim's
# UPDATE as a CTE (as `_CLAIM_MANY`), each claimed job's start event built from what it
# returned, written with the unit's held events at the next positions, and the claimed rows
# answered with their owners' execution facts (as `_CLAIM_MANY_WITH_FACTS`).
_CLAIMED_ROWS = table(
    "claimed",
    column("id", String),
    column("function_version_id", String),
    column("resolved_inputs", JSONType),
    column("user_id", String),
    column("function_id", String),
    column("workflow_run_id", String),
    column("node_key", String),
)
_CLAIM_ANSWER = with_execution_facts(
    select(*_CLAIMED_ROWS.c), _CLAIMED_ROWS.c.function_version_id, _CLAIMED_ROWS.c.user_id
)
_CLAIM_SOURCE = """claimed AS (
    UPDATE jobs SET status = 'running', started_at = :now, heartbeat_at = :now, lease = :b_lease
    WHERE id = ANY(:claim_ids) AND status = 'queued'
    RETURNING id, function_version_id, resolved_inputs, user_id, function_id, workflow_run_id,
        node_key
)"""
_STARTED_EVENTS = """
    SELECT c.event_id, :s_type, k.id, 'job', :s_recorded,
        jsonb_build_object(
            'job_id', k.id, 'function', k.function_id,
            'function_version_id', k.function_version_id,
            'run_id', k.workflow_run_id, 'node_key', k.node_key
        ),
        k.workflow_run_id, :s_slot
    FROM claimed AS k JOIN unnest(:claim_ids, :event_ids) AS c(job_id, event_id)
        ON c.job_id = k.id
"""
_CLAIM_NUMBERED = (
    text(
        numbered_with(
            _CLAIM_SOURCE,
            _STARTED_EVENTS,
            # Its facts' joins, as `with_execution_facts` writes them (no bound parameters).
            str(_CLAIM_ANSWER.compile(dialect=postgresql.base.PGDialect())),  # type: ignore[no-untyped-call]
        )
    )
    .bindparams(
        *NUMBERED_BINDS,
        bindparam("now", type_=UTCDateTime()),
        bindparam("b_lease", type_=String),
        bindparam("claim_ids", type_=ARRAY(String)),
        bindparam("event_ids", type_=ARRAY(String)),
        bindparam("s_type", type_=String),
        bindparam("s_recorded", type_=DateTime(timezone=True)),
        bindparam("s_slot", type_=BigInteger),
    )
    .columns(*_CLAIM_ANSWER.selected_columns)
)


class FoldedJobStoreRepository(JobStoreRepository):
    """`JobStoreRepository` with the transitions that write their unit's events (PostgreSQL)."""

    async def claim_numbered(
        self,
        job_ids: Iterable[str],
        now: datetime,
        lease: str,
        started: dict[str, Any],
        slot: int,
        held: Sequence[tuple[int, dict[str, Any]]],
    ) -> dict[str, ClaimedRow]:
        """PostgreSQL: `claim_many`, and in the same statement the unit's `held` events
        (each in its slot) and each claimed job's start event in `slot` (by job id), at the
        next positions (`EventRepository.insert_numbered`): the unit's last statement.
        `started` is the type and time of the start events."""
        ids = sorted(set(job_ids))  # one lock order for every claimer
        params: dict[str, Any] = numbered_params(held) | {
            "now": now,
            "b_lease": lease,
            "claim_ids": ids,
            "event_ids": [new_id() for _ in ids],
            "s_type": started["type"],
            "s_recorded": started["recorded_at"],
            "s_slot": slot,
        }
        rows = await self.session.execute(_CLAIM_NUMBERED, params)
        return {row[0]: claimed_row(row, lease, True) for row in rows}

    async def finish_numbered(
        self,
        item: Finish,
        now: datetime,
        event: dict[str, Any],
        slot: int,
        held: Sequence[tuple[int, dict[str, Any]]],
    ) -> tuple[str | None, str | None] | None:
        """PostgreSQL: `finish_many` of one finish, and in the same statement the unit's
        `held` events (each in its slot) and the job's end `event` (an `event_row` whose data
        lacks `run_id` and `node_key`, taken from the job's row) in `slot` when the finish took
        effect, at the next positions (`EventRepository.insert_numbered`): the unit's last
        statement. Its run and node, or None when it took no effect."""
        params: dict[str, Any] = numbered_params(held) | {
            "job_id": item.job_id,
            "logs": item.outcome.logs,
            "now": now,
            "b_lease": item.lease,
            "outputs": item.outcome.outputs,
            "error": item.outcome.error,
            "e_id": event["id"],
            "e_type": event["type"],
            "e_recorded": event["recorded_at"],
            "e_data": json.dumps(event["data"]),
            "e_slot": slot,
        }
        statement = _FINISH_NUMBERED["success" if item.outcome.status == "success" else "failed"]
        row = (await self.session.execute(statement, params)).first()
        if row is None:
            return None
        changes.changed(row[0])
        return (row[0], row[1])
