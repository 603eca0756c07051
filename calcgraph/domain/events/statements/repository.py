"""The statements of the event log's readers, built once (building one cost a long-poll's page
about as much as running it): who sees an event, by its subject's rules as they stand now
(in SQL, so hidden events never load), a page's statement per filter shape, and the log's
head (`calcgraph.domain.events.repository` runs them)."""

from __future__ import annotations

import functools
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    Table,
    and_,
    bindparam,
    false,
    literal,
    or_,
    select,
    true,
)

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.repository import visible_to
from calcgraph.domain.events.catalog import TypeFilter
from calcgraph.domain.events.models import Event, EventCursor, Webhook
from calcgraph.domain.functions.models import Function
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages.models import Package
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.workflows.models import Workflow

SEQUENCE = "sequence"
"""The `event_cursors` row holding the last position given."""
_EVENTS = cast(Table, Event.__table__)

_VIEWER = "event_viewer"
"""The bound parameter that names the reader in the visibility clauses built once below."""


def _runs_of(me: str | ColumnElement[str]) -> Select[str]:
    return (
        select(WorkflowRun.id)
        .join(Workflow, Workflow.id == WorkflowRun.workflow_id)
        .where(
            WorkflowRun.user_id == me,
            visible_to(me, Workflow.owner_id, Workflow.visibility, Workflow.organization_id),
        )
    )


def _found(query: Select[Any]) -> ColumnElement[bool]:
    """Whether `query` (correlated to the event's subject) finds a row: a scalar subquery of
    one row, which PostgreSQL runs per event, probing the subject's row by its key."""
    return query.with_only_columns(literal(1)).limit(1).scalar_subquery().is_not(None)


def _visible_to(me: str | ColumnElement[str], probed: bool) -> ColumnElement[bool]:
    """Who sees an event, `visible_event_clause`'s rules. `probed`: each kind's rule probes
    the event's subject by its key, once per event read; else it is `subject IN (<what the
    reader may see of that kind>)`, which PostgreSQL hashes once per statement. The probe is
    the cheaper where few events are read past the cursor (a follower at the log's end: the
    hash of every job a reader ever ran, 5,426 on issue 23's flood, was 3.5 ms of a page,
    probed 1.25 ms); the hash where many are (a reader who sees few events in a busy log read
    from its start: 13 ms hashed, 55 ms probed, at 60,000 events)."""

    def packages_seen() -> ColumnElement[bool]:
        return visible_to(me, Package.owner_id, Package.visibility, Package.organization_id)

    kind, subject = Event.subject_kind, Event.subject
    jobs = select(Job.id).join(Package, Package.id == Job.package_id)
    jobs = jobs.where(Job.user_id == me, packages_seen())
    runs = _runs_of(me)
    packages = select(Package.id).where(packages_seen())
    functions = select(Function.id).join(Package, Package.id == Function.package_id)
    seen_functions = functions.where(packages_seen())
    owned_functions = functions.where(Package.owner_id == me)
    webhooks = select(Webhook.id).where(Webhook.user_id == me)

    def among(query: Select[Any], key: Any) -> ColumnElement[bool]:
        return _found(query.where(key == subject)) if probed else subject.in_(query)

    return or_(
        and_(kind == "job", among(jobs, Job.id)),
        and_(kind == "run", among(runs, WorkflowRun.id)),
        and_(kind == "package", among(packages, Package.id)),
        and_(kind == "function", among(seen_functions, Function.id)),
        and_(kind == "build", among(owned_functions, Function.id)),
        and_(kind == "user", subject == me),
        and_(kind == "webhook", among(webhooks, Webhook.id)),
    )


# Built once, the reader bound at each execution (`viewer`): building the clause cost a
# long-poll's page more CPU than running it (every page of a follower woken by each unit that
# recorded events, 20 a second in issue 23's flood).
VISIBLE_RUNS = _runs_of(bindparam(_VIEWER, type_=String()))
_VISIBLE_EVENT = _visible_to(bindparam(_VIEWER, type_=String()), probed=False)
_PROBED_EVENT = _visible_to(bindparam(_VIEWER, type_=String()), probed=True)
PROBED_SPAN = 2000
"""A page read from at most this many positions before the log's end probes each event's
subject (`_visible_to`): about 1 µs an event read, against a hash of the reader's history."""


def viewer(principal: Principal | None) -> dict[str, str]:
    """The parameters of a statement that holds `visible_event_clause(principal)`."""
    return {} if principal is None or principal.is_admin else {_VIEWER: principal.user_id}


LAST_POSITION = select(EventCursor.position).where(EventCursor.name == SEQUENCE)
UNSEQUENCED = select(Event.id).where(Event.position.is_(None)).limit(1)
HEAD = select(LAST_POSITION.scalar_subquery(), UNSEQUENCED.exists())


@functools.lru_cache(maxsize=256)
def page_statement(
    types: TypeFilter, upto: bool, everyone: bool, subject: bool, run: bool, probed: bool = False
) -> Select[Any]:
    """`EventRepository.page`'s statement for one shape of filter, built once and bound at
    each execution (`after`, `limit`, `upto`, `subject`, `run` and the viewer): building it
    cost a long-poll's page about as much as running it. It reads the table's rows, not
    mapped `Event`s: a page is read once and never changed, and loading 500 rows as objects
    cost about 23 µs each."""
    query = select(*_EVENTS.c).where(Event.position > bindparam("after"), type_clause(types))
    if upto:
        query = query.where(Event.position <= bindparam("upto"))
    if not everyone:
        query = query.where(_PROBED_EVENT if probed else _VISIBLE_EVENT)
    if subject:
        query = query.where(Event.subject == bindparam("subject"))
    if run:
        query = query.where(Event.run_id == bindparam("run"))
    return query.order_by(Event.position).limit(bindparam("limit"))


def visible_event_clause(principal: Principal) -> ColumnElement[bool]:
    """Who sees an event, by the rules of its subject as they stand now (contract section 9):
    job events by who may GET the job, run events by who may GET the run, package and file
    events by who may GET the package, build events by the function's owner, login and
    webhook events by that user; admins all. A statement that holds it is executed with
    `viewer(principal)`."""
    return true() if principal.is_admin else _VISIBLE_EVENT


def type_clause(types: TypeFilter) -> ColumnElement[bool]:
    if types.everything:
        return true()
    parts: list[ColumnElement[bool]] = []
    if types.exact:
        parts.append(Event.type.in_(sorted(types.exact)))
    parts.extend(Event.type.startswith(p, autoescape=True) for p in types.prefixes)
    return or_(*parts) if parts else false()
