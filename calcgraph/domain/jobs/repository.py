"""All SQL of reading jobs. Visibility is re-evaluated in every statement, through the
package's current visibility and the caller's current memberships."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import (
    JSON,
    ColumnElement,
    Table,
    and_,
    case,
    func,
    insert,
    null,
    select,
    true,
    type_coerce,
)

from calcgraph.db.base import JSONType, RepositoryBase
from calcgraph.db.dialect import TextBytes, by_keys, insert_from_arrays
from calcgraph.domain import answers
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.models import Function
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.views import JOB_FIELDS, JobView
from calcgraph.domain.listing.filters import EVERY_JOB, JobFilter
from calcgraph.domain.listing.paging import Page, PageRequest, creation_key, encode_cursor
from calcgraph.domain.listing.repository import in_range, keyset_clause, name_contains
from calcgraph.domain.packages.models import Package
from calcgraph.domain.packages.repository import visible_clause
from calcgraph.domain.read_models import from_attributes

_JOBS = cast(Table, Job.__table__)
_LISTED_COLUMNS = tuple(
    f.name
    for f in dataclasses.fields(JobView)
    if f.name not in ("inputs", "outputs", "inputs_omitted", "outputs_omitted")
)


def job_view(job: Job) -> JobView:
    return from_attributes(JobView, job, outputs_omitted=False, inputs_omitted=False)


def visible_job_clause(principal: Principal) -> ColumnElement[bool]:
    """`policy.can_see_job` as SQL, on a query that joins the job's package: the caller's own
    jobs while their package stays visible to the caller; admins every job."""
    if principal.is_admin:
        return true()
    return and_(Job.user_id == principal.user_id, visible_clause(principal))


def _columns(fields: Sequence[str]) -> list[Any]:
    unknown = set(fields) - set(JOB_FIELDS)
    if unknown:
        raise ValueError(f"not a job field: {sorted(unknown)}")
    return [_JOBS.c[name] for name in fields]


class JobRepository(RepositoryBase[Job]):
    model = Job

    async def list_of_caller(
        self, principal: Principal, page: PageRequest, where: JobFilter = EVERY_JOB
    ) -> Page[JobView]:
        """The caller's own jobs whose package the caller can still see, newest first, within
        one answer's bound (contract 8b): first the page's ids and value sizes, computed by the
        database; then the values of the rows that fit, outputs over 64 KiB left out. `where`
        narrows them (function `package/name` search, statuses, creation time)."""
        other = TextBytes(Job.logs) + TextBytes(Job.error)
        query = (
            select(Job.id, Job.created_at, Job.inputs_bytes, Job.outputs_bytes, other)
            .join(Package, Package.id == Job.package_id)
            .where(Job.user_id == principal.user_id, visible_clause(principal))
        )
        if where.function is not None:
            query = query.join(Function, Function.id == Job.function_id).where(
                name_contains(Package.name + "/" + Function.name, where.function)
            )
        if where.statuses:
            query = query.where(Job.status.in_(where.statuses))
        query = query.where(in_range(Job.created_at, where.created))
        query = query.where(keyset_clause(Job.created_at, Job.id, page.after, newest_first=True))
        sized = (
            await self.session.execute(
                query.order_by(Job.created_at.desc(), Job.id.desc()).limit(page.limit + 1)
            )
        ).all()
        shown = [
            (size_in if answers.listed(size_in) else 0)
            + (size_out if answers.listed(size_out) else 0)
            + size_other
            for _, _, size_in, size_out, size_other in sized[: page.limit]
        ]
        kept = sized[: answers.rows_within(shown)]
        size = sum(shown[: len(kept)])
        omitted = {row[0] for row in kept if not answers.listed(row[3])}
        omitted_in = {row[0] for row in kept if not answers.listed(row[2])}
        views = {
            view.id: view
            for view in await self._listed_views([r[0] for r in kept], omitted, omitted_in)
        }
        items = [views[row[0]] for row in kept if row[0] in views]
        more = len(kept) < len(sized)
        cursor = encode_cursor(creation_key(items[-1])) if more and items else None
        return Page(items, cursor, size_hint=size)

    async def _listed_views(
        self, ids: Sequence[str], omitted: set[str], omitted_in: set[str]
    ) -> list[JobView]:
        """The rows of `ids`, the outputs of `omitted` and the inputs of `omitted_in` left out
        (never read from the database)."""
        if not ids:
            return []
        columns = [_JOBS.c[name] for name in _LISTED_COLUMNS]
        listed_inputs = type_coerce(
            case((_JOBS.c.id.in_(omitted_in), null()), else_=_JOBS.c.inputs), JSONType
        ).label("inputs")
        listed_outputs = type_coerce(
            case((_JOBS.c.id.in_(omitted), null()), else_=_JOBS.c.outputs), JSONType
        ).label("outputs")
        connection = await self.session.connection()
        rows = await connection.execute(
            select(*columns, listed_inputs, listed_outputs).where(_JOBS.c.id.in_(list(ids)))
        )
        return [
            from_attributes(
                JobView,
                row,
                outputs_omitted=row.id in omitted,
                inputs_omitted=row.id in omitted_in,
            )
            for row in rows
        ]

    async def count_by_status(self) -> dict[str, int]:
        """Every job counted by status, in one GROUP BY (the status index covers it)."""
        rows = await self.session.execute(select(Job.status, func.count()).group_by(Job.status))
        return {status: count for status, count in rows}

    async def get_view(self, job_id: str) -> JobView | None:
        job = await self.session.get(Job, job_id)
        return job_view(job) if job is not None else None

    async def get_views(self, ids: Sequence[str]) -> list[JobView]:
        if not ids:
            return []
        return [job_view(j) for j in await self.session.scalars(select(Job).where(Job.id.in_(ids)))]

    async def visible_fields_by_id(
        self, principal: Principal, ids: Sequence[str], fields: Sequence[str]
    ) -> list[dict[str, Any]]:
        """`fields` (of JOB_FIELDS) of the jobs among `ids` the caller may read now, each
        read by its key (one array parameter on PostgreSQL, however many ids)."""
        if not ids:
            return []
        query = _visible_by_ids(self.session.get_bind().dialect.name, tuple(fields), principal)
        return await self._projected(query, fields, {"ids": list(ids)})

    async def visible_fields_of_runs(
        self, principal: Principal, run_ids: Sequence[str], fields: Sequence[str]
    ) -> list[dict[str, Any]]:
        """`fields` (of JOB_FIELDS) of every job of the runs `run_ids` that the caller may read
        now, by the (run, node, attempt) index: a whole run's jobs in one range, not one probe
        per job (a run's node states lead to jobs of that run only)."""
        if not run_ids:
            return []
        query = (
            select(*_columns(fields))
            .join_from(_JOBS, Package, Package.id == _JOBS.c.package_id)
            .where(_JOBS.c.workflow_run_id.in_(run_ids), visible_job_clause(principal))
        )
        return await self._projected(query, fields)

    async def _projected(
        self, query: Any, fields: Sequence[str], parameters: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        # On the session's connection: plain rows, without the ORM's per-row loading (the
        # visibility clause names model attributes, which would make it an ORM statement).
        connection = await self.session.connection()
        rows = (await connection.execute(query, parameters)).all()
        return [dict(zip(fields, row, strict=True)) for row in rows]

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """Job rows as plain values, one INSERT per set of keys (workflow node jobs of a tick:
        one, or two with result-cache hits): on PostgreSQL one statement from arrays, else an
        executemany. Core, not the ORM's bulk path, which costs more than the statement for
        a tick that submits 100 nodes. Every row names the columns that have a default."""
        groups: dict[frozenset[str], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(frozenset(row), []).append(row)
        arrays = self.session.get_bind().dialect.name == "postgresql"
        for keys, group in groups.items():
            if arrays and len(group) > 1:
                await self._insert_arrays(sorted(keys), group)
            else:
                await self.session.execute(insert(_JOBS), group)

    async def _insert_arrays(self, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
        await self.session.execute(*_from_arrays(columns, rows))

    def insert_statement(self, rows: Sequence[dict[str, Any]]) -> tuple[Any, dict[str, Any]] | None:
        """PostgreSQL, rows that name the same columns (a tick's node jobs without a result
        cache hit): `insert_many`'s one INSERT from arrays as (statement, parameters), for a
        caller that sends it inside a statement of its own (a tick's write, as a CTE: one
        round trip less). None otherwise: the caller calls `insert_many`. Its parameters are
        the jobs' columns' names after `JOB_PARAMETER`."""
        if not rows or self.session.get_bind().dialect.name != "postgresql":
            return None
        keys = set(rows[0])
        if any(set(row) != keys for row in rows):
            return None
        return _from_arrays(sorted(keys), rows)


def _from_arrays(
    columns: Sequence[str], rows: Sequence[dict[str, Any]]
) -> tuple[Any, dict[str, Any]]:
    """One INSERT from arrays: what every row shares (the function, the run, the user, the
    status) bound once, each other column as an array; JSON as JSON text, each distinct object
    encoded once (a node job's inputs are its resolved inputs)."""
    first = rows[0]
    # `list.count` compares in C (identity first): a tick's 1,000 rows share most columns.
    shared = tuple(
        c for c in columns if c != "id" and [row[c] for row in rows].count(first[c]) == len(rows)
    )
    varying = tuple(c for c in columns if c not in shared)
    encoded: dict[int, str] = {}

    def json_text(value: Any) -> str:
        found = encoded.get(id(value))
        if found is None:
            found = encoded[id(value)] = json.dumps(value)
        return found

    params: dict[str, Any] = {}
    for name in columns:
        is_json = isinstance(_JOBS.c[name].type, JSON)
        if name in shared:
            params[JOB_PARAMETER + name] = json_text(first[name]) if is_json else first[name]
        else:
            params[JOB_PARAMETER + name] = [
                json_text(r[name]) if is_json else r[name] for r in rows
            ]
    return _insert_from_arrays(varying, shared), params


JOB_PARAMETER = "j_"
"""The prefix of the parameters of `insert_statement`'s INSERT (a tick's statements name
theirs `k_`, `v_` and `a_`)."""


@functools.lru_cache(maxsize=256)
def _visible_by_ids(dialect_name: str, fields: tuple[str, ...], principal: Principal) -> Any:
    """The statement of `visible_fields_by_id`, built once per caller and fields (a page of
    node states asks it at every query): building it cost more than running it."""
    return by_keys(
        dialect_name,
        _columns(fields),
        _JOBS.c.id,
        "ids",
        visible_job_clause(principal),
        join=(Package, Package.id == _JOBS.c.package_id),
    )


@functools.cache
def _insert_from_arrays(arrays: tuple[str, ...], scalars: tuple[str, ...]) -> Any:
    return insert_from_arrays(_JOBS, arrays, scalars, JOB_PARAMETER)
