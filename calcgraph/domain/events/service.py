"""Recording events, and reading them back as their subjects' rules allow.

`record(session, type, subject, data)` is the one way to record an event: it writes the row
in the caller's unit of work (so the event exists exactly when the change it reports was
committed) and marks the unit, whose hook wakes the waiting readers after the commit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import FieldError, NotFound, ValidationError
from calcgraph.domain.events import signal
from calcgraph.domain.events.catalog import (
    CALCULATION_STARTED,
    JOB_FAILED,
    JOB_SUCCEEDED,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_CREATED,
    RUN_FAILED,
    SUBJECT_KINDS,
    TypeFilter,
    TypeFilterError,
    parse_types,
    run_of,
)
from calcgraph.domain.events.repository import SEQUENCE_BATCH, EventRepository
from calcgraph.domain.events.views import EventView, event_view
from calcgraph.domain.jobs.store.repository import ClaimedRow, Finish

DEFAULT_LIMIT = 100
MAX_LIMIT = 500


def event_row(
    type_: str, subject: str, data: Mapping[str, Any], subject_kind: str | None = None
) -> dict[str, Any]:
    kind = subject_kind or SUBJECT_KINDS.get(type_)
    if kind is None:
        raise ValueError(f"event type {type_!r} needs its subject's kind")
    return {
        "id": new_id(),
        "type": type_,
        "subject": subject,
        "subject_kind": kind,
        "recorded_at": utcnow(),
        "data": dict(data),
        "run_id": run_of(kind, subject, data),
    }


async def record(
    session: AsyncSession,
    type_: str,
    subject: str,
    data: Mapping[str, Any],
    *,
    subject_kind: str | None = None,
) -> str:
    """Record one event in the caller's unit of work; returns its id.

    `type_` is one of `catalog.TYPES`; `subject` the id of what it is about; `data` a JSON
    object. `subject_kind` (`package` or `function`) only for `calcgraph.file.uploaded`, whose
    subject may be either; every other type implies it."""
    row = event_row(type_, subject, data, subject_kind)
    await record_rows(session, [row])
    return str(row["id"])


async def record_rows(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Several `event_row`s: held for the last statement of a unit with the event signal's
    hook (`signal.HELD`), which writes and numbers them in one statement; else in one
    statement now, numbered later."""
    if not rows:
        return
    held = session.info.get(signal.HELD)
    if held is not None:
        held.hold(rows)
        return
    await EventRepository.from_session(session).insert_many(rows)
    signal.mark(*{str(row["type"]) for row in rows}, runs={row.get("run_id") for row in rows})


def held_for_last_statement(session: AsyncSession) -> signal.Marks | None:
    """The unit's marks, when its events are held for its last statement and the caller's
    statement, its last change, may write them instead (PostgreSQL; none were written apart,
    which the hook numbers under the sequencer's advisory lock first): the caller then takes
    the held rows (`Marks.take`) and marks what it wrote (`Marks.written`)."""
    held = session.info.get(signal.HELD)
    if not isinstance(held, signal.Marks) or held.unheld or held.at_commit:
        return None
    return held if session.get_bind().dialect.name == "postgresql" else None


def events_at_commit(session: AsyncSession) -> None:
    """This unit locks rows after a statement that would have written its held events (a
    run's cancel: its jobs after its tick): the hook writes them before the commit instead.
    The statement writing them locks the sequencer's row to the commit, and every unit locks
    it last (`EventRepository.insert_numbered`): a cancel holding it while it waited for a
    job's row met a worker finishing that job, which held the row and waited for the
    sequencer (PostgreSQL: deadlock detected, the cancel answered 503)."""
    held = session.info.get(signal.HELD)
    if isinstance(held, signal.Marks):
        held.at_commit = True


def job_started_row(job: Mapping[str, Any]) -> dict[str, Any]:
    """`calcgraph.calculation.started` of a job row (`id`, `function_id`,
    `function_version_id`, `workflow_run_id`, `node_key`)."""
    return event_row(
        CALCULATION_STARTED,
        job["id"],
        {
            "job_id": job["id"],
            "function": job["function_id"],
            "function_version_id": job["function_version_id"],
            "run_id": job.get("workflow_run_id"),
            "node_key": job.get("node_key"),
        },
    )


def job_ended_row(job: Mapping[str, Any]) -> dict[str, Any]:
    """`calcgraph.job.succeeded` or `.failed` of a finished job row (`id`, `status`, `error`,
    `workflow_run_id`, `node_key`)."""
    error = job.get("error")
    return event_row(
        JOB_SUCCEEDED if job["status"] == "success" else JOB_FAILED,
        job["id"],
        {
            "job_id": job["id"],
            "status": job["status"],
            "error": (
                None if not error else {"kind": error.get("kind"), "message": error.get("message")}
            ),
            "run_id": job.get("workflow_run_id"),
            "node_key": job.get("node_key"),
        },
    )


def transition_rows(
    claimed: Iterable[ClaimedRow],
    finishes: Sequence[Finish],
    finished: Mapping[str, tuple[str | None, str | None]],
) -> list[dict[str, Any]]:
    """The events of a batch of claims and finishes, from what their UPDATEs returned
    (`finished`: job id -> its run and node, for the finishes that took effect)."""
    rows = [
        job_started_row(
            {
                "id": c.job_id,
                "function_id": c.function_id,
                "function_version_id": c.function_version_id,
                "workflow_run_id": c.workflow_run_id,
                "node_key": c.node_key,
            }
        )
        for c in claimed
    ]
    # One event per job: the first finish of a job in the batch is the one that took effect.
    for item in {f.job_id: f for f in reversed(finishes)}.values():
        if item.job_id in finished:
            run_id, node_key = finished[item.job_id]
            rows.append(
                job_ended_row(
                    {
                        "id": item.job_id,
                        "status": item.outcome.status,
                        "error": item.outcome.error,
                        "workflow_run_id": run_id,
                        "node_key": node_key,
                    }
                )
            )
    return rows


async def record_job_rows(session: AsyncSession, rows: Iterable[Mapping[str, Any]]) -> None:
    """The events of job rows written as they are (a node born running, or born finished:
    a cache hit, a chain link): started when it ran in a sandbox, ended when finished."""
    events: list[dict[str, Any]] = []
    for row in rows:
        status = row.get("status")
        ran = not row.get("cache_hit") and row.get("started_at") is not None
        # A node refused before it ran (born failed, `permission_denied`) never started.
        refused = (row.get("error") or {}).get("kind") == "permission_denied"
        if status == "running" or (status in ("success", "failed") and ran and not refused):
            events.append(job_started_row(row))
        if status in ("success", "failed"):
            events.append(job_ended_row(row))
    await record_rows(session, events)


def upload_data(
    kind: str, subject: str, version: str, files: Mapping[str, bytes], principal: Principal
) -> dict[str, Any]:
    """`data` of `calcgraph.file.uploaded`: `package` or `function` (its id), the version,
    each file's path, size and SHA-256, and who uploaded them."""
    return {
        kind: subject,
        "version": version,
        "files": [
            {"path": path, "size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
            for path, content in sorted(files.items())
        ],
        "uploaded_by": principal.username,
    }


RUN_EVENTS = {
    "completed": RUN_COMPLETED,
    "failed": RUN_FAILED,
    "cancelled": RUN_CANCELLED,
}


async def record_run(
    session: AsyncSession,
    run_id: str,
    workflow: str,
    status: str,
    first_failed_node_key: str | None = None,
    terminal_outputs: Mapping[str, Any] | None = None,
) -> None:
    """`calcgraph.run.created` for a pending run, else the event of its terminal status."""
    type_ = RUN_CREATED if status == "pending" else RUN_EVENTS[status]
    await record(
        session,
        type_,
        run_id,
        {
            "run_id": run_id,
            "workflow": workflow,
            "status": status,
            "first_failed_node_key": first_failed_node_key,
            "terminal_outputs": (
                dict(terminal_outputs)
                if status == "completed" and terminal_outputs is not None
                else None
            ),
        },
    )


async def record_job_transitions(
    session: AsyncSession, started: Iterable[str] = (), ended: Iterable[str] = ()
) -> None:
    """The events of jobs this unit of work claimed (`started`) or finished (`ended`), read
    back in one statement."""
    started, ended = list(started), list(ended)
    if not started and not ended:
        return
    rows = await EventRepository.from_session(session).job_rows([*started, *ended])
    by_id = {row["id"]: row for row in rows}
    events = [job_started_row(by_id[i]) for i in started if i in by_id]
    events += [job_ended_row(by_id[i]) for i in ended if i in by_id]
    await record_rows(session, events)


@dataclass(frozen=True)
class EventQuery:
    """A pull's filter and position, parsed."""

    types: TypeFilter
    subject: str | None
    after: int | None
    """None with `now`: from the current end."""
    limit: int
    from_now: bool = False
    run: str | None = None
    """Only the events of this workflow run: its own and its jobs'."""


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def parse_query(
    types: Sequence[str],
    subject: str | None,
    after: str | None,
    limit: int | None,
    run: str | None = None,
) -> EventQuery:
    errors: list[FieldError] = []
    try:
        parsed = parse_types(types)
    except TypeFilterError as exc:
        errors.append(FieldError(("query", "type"), str(exc)))
        parsed = TypeFilter(frozenset(), ())
    if subject is not None and (len(subject) > 36 or "\x00" in subject or not subject):
        errors.append(FieldError(("query", "subject"), "an identifier of at most 36 characters"))
    if run is not None and not _UUID.fullmatch(run):
        errors.append(FieldError(("query", "run"), "a workflow run id"))
    position: int | None = 0
    from_now = False
    if after is not None and after != "":
        if after == "now":
            position, from_now = None, True
        elif after.isascii() and after.isdigit() and len(after) <= 18:
            position = int(after)
        else:
            errors.append(FieldError(("query", "after"), "a cursor from next_cursor, or now"))
    size = DEFAULT_LIMIT if limit is None else limit
    if not 1 <= size <= MAX_LIMIT:
        errors.append(FieldError(("query", "limit"), f"between 1 and {MAX_LIMIT}"))
    if errors:
        raise ValidationError("invalid event query", errors)
    return EventQuery(parsed, subject, position, size, from_now, run)


@dataclass(frozen=True)
class EventPage:
    items: list[EventView]
    next_cursor: str


class EventService:
    async def sequence(self, session: AsyncSession) -> int:
        """Number the events committed since the last call (see `EventRepository.sequence`)."""
        return await EventRepository.from_session(session).sequence()

    async def write_numbered(self, session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
        """Write a unit's held events with the next positions (see
        `EventRepository.insert_numbered`)."""
        await EventRepository.from_session(session).insert_numbered(rows)

    async def sequence_all(self, session: AsyncSession) -> None:
        """Number every event the session sees unnumbered (its own included), batch by batch."""
        repository = EventRepository.from_session(session)
        while await repository.sequence() >= SEQUENCE_BATCH:
            pass

    async def unsequenced(self, session: AsyncSession) -> bool:
        return await EventRepository.from_session(session).unsequenced()

    async def end(self, session: AsyncSession) -> int:
        return await EventRepository.from_session(session).last_position()

    async def head(self, session: AsyncSession) -> tuple[int, bool]:
        """The log's end and whether events wait for a position, in one read."""
        return await EventRepository.from_session(session).head()

    async def digest(
        self, session: AsyncSession, after: int, upto: int
    ) -> list[tuple[str, str | None, int]]:
        return await EventRepository.from_session(session).digest(after, upto)

    async def require_run(self, session: AsyncSession, principal: Principal, run_id: str) -> None:
        """NotFound unless the caller may see the run (`GET /workflow-runs/{id}`'s rule):
        one answer for a run that does not exist and another user's, which says nothing of it."""
        if not await EventRepository.from_session(session).run_visible(principal, run_id):
            raise NotFound(f"no workflow run {run_id!r}")

    async def page(
        self,
        session: AsyncSession,
        principal: Principal,
        query: EventQuery,
        after: int,
        end: int | None = None,
    ) -> EventPage:
        """The page after `after`; `end`: the log's end, read just before (the repository's
        `page` reads a page near it the cheaper way)."""
        rows = await EventRepository.from_session(session).page(
            principal, after, query.limit, query.types, query.subject, query.run, end=end
        )
        last = rows[-1].position if rows else after
        return EventPage([event_view(row) for row in rows], str(last))

    async def recent(
        self, session: AsyncSession, principal: Principal, types: TypeFilter, limit: int
    ) -> EventPage:
        """The newest `limit` events the caller may see, newest first; `next_cursor` is the
        end they were read at, so a follower starting after it misses none and repeats none."""
        repository = EventRepository.from_session(session)
        end = await repository.last_position()
        rows = await repository.latest(principal, end, limit, types)
        return EventPage([event_view(row) for row in rows], str(end))

    async def prune(self, session: AsyncSession, days: float, now: datetime | None = None) -> int:
        before = (now or utcnow()) - timedelta(days=days)
        return await EventRepository.from_session(session).prune(before)


event_service = EventService()
