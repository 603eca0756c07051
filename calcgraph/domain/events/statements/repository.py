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
    one row, which PostgreSQL runs per event, probing the subject's row by its key. As
    `subject IN (<every job the reader may see>)` inside the OR of the kinds (or as EXISTS,
    which it turns into the same), it hashed every job the reader ever ran on every page: 3.5
    ms of a page of 500 job events at 5,426 jobs, growing with the reader's history (issue
    23's follower)."""
    return query.with_only_columns(literal(1)).limit(1).scalar_subquery().is_not(None)


def _visible_to(me: str | ColumnElement[str]) -> ColumnElement[bool]:
    def packages_seen() -> ColumnElement[bool]:
        return visible_to(me, Package.owner_id, Package.visibility, Package.organization_id)

    kind, subject = Event.subject_kind, Event.subject
    job = (
        select(Job.id)
        .join(Package, Package.id == Job.package_id)
        .where(Job.id == subject, Job.user_id == me, packages_seen())
    )
    run = _runs_of(me).where(WorkflowRun.id == subject)
    package = select(Package.id).where(Package.id == subject, packages_seen())
    function = (
        select(Function.id)
        .join(Package, Package.id == Function.package_id)
        .where(Function.id == subject, packages_seen())
    )
    owned_function = (
        select(Function.id)
        .join(Package, Package.id == Function.package_id)
        .where(Function.id == subject, Package.owner_id == me)
    )
    webhook = select(Webhook.id).where(Webhook.id == subject, Webhook.user_id == me)
    return or_(
        and_(kind == "job", _found(job)),
        and_(kind == "run", _found(run)),
        and_(kind == "package", _found(package)),
        and_(kind == "function", _found(function)),
        and_(kind == "build", _found(owned_function)),
        and_(kind == "user", subject == me),
        and_(kind == "webhook", _found(webhook)),
    )


# Built once, the reader bound at each execution (`viewer`): building the clause cost a
# long-poll's page more CPU than running it (every page of a follower woken by each unit that
# recorded events, 20 a second in issue 23's flood).
VISIBLE_RUNS = _runs_of(bindparam(_VIEWER, type_=String()))
_VISIBLE_EVENT = _visible_to(bindparam(_VIEWER, type_=String()))


def viewer(principal: Principal | None) -> dict[str, str]:
    """The parameters of a statement that holds `visible_event_clause(principal)`."""
    return {} if principal is None or principal.is_admin else {_VIEWER: principal.user_id}


LAST_POSITION = select(EventCursor.position).where(EventCursor.name == SEQUENCE)
UNSEQUENCED = select(Event.id).where(Event.position.is_(None)).limit(1)
HEAD = select(LAST_POSITION.scalar_subquery(), UNSEQUENCED.exists())


@functools.lru_cache(maxsize=256)
def page_statement(
    types: TypeFilter, upto: bool, everyone: bool, subject: bool, run: bool
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
        query = query.where(_VISIBLE_EVENT)
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
