"""What a query selects below the current field, read from the resolver's `info`: which fields
of the items of a list, and which fields of a job, so that loaders read only those."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from strawberry.types.base import get_object_definition
from strawberry.types.nodes import SelectedField, Selection
from strawberry.utils.str_converters import to_camel_case

from calcgraph.domain.jobs.views import JOB_FIELDS
from calcgraph.schema.context import Info
from calcgraph.schema.jobs import JobType

JOB_KEYS = ("id", "function_id", "package_id", "workflow_run_id")
"""Read whatever the query selects: the job's own resolvers (`package`, `function`, `run`)
need them."""


def _fields(selections: Sequence[Selection]) -> Iterator[SelectedField]:
    """The fields of a selection set, fragments' fields included."""
    for selection in selections:
        if isinstance(selection, SelectedField):
            yield selection
        else:
            yield from _fields(selection.selections)


def selects(info: Info, name: str) -> bool:
    """Whether the query asks for field `name` of the items of the current list field."""
    return any(f.name == name for field in info.selected_fields for f in _fields(field.selections))


def asks_for_plan(info: Info) -> bool:
    """Whether a query on a run needs its plan: `planSnapshot`, `planGraph`, or the function
    version of a node (read with the run then, in its statement's session, rather than by a
    loader)."""
    for run in info.selected_fields:
        for field in _fields(run.selections):
            if field.name in ("planSnapshot", "planGraph"):
                return True
            if field.name in ("nodeStates", "nodeState"):
                names = {f.name for f in _fields(field.selections)}
                if names & {"functionVersionId", "functionVersion"}:
                    return True
    return False


@cache
def _python_names() -> dict[str, str]:
    """GraphQL name -> Python name of the fields of `JobType` that are columns of a job."""
    names: dict[str, str] = {}
    for field in get_object_definition(JobType, strict=True).fields:
        if field.python_name in JOB_FIELDS:
            names[field.graphql_name or to_camel_case(field.python_name)] = field.python_name
    return names


def job_fields(info: Info, relation: str = "job") -> tuple[str, ...]:
    """The columns of a job that the query reads through field `relation` of the items of the
    current list field (every `relation` field, aliased or in fragments, together)."""
    names = _python_names()
    wanted = set(JOB_KEYS)
    for field in info.selected_fields:
        for item_field in _fields(field.selections):
            if item_field.name == relation:
                wanted.update(
                    names[f.name] for f in _fields(item_field.selections) if f.name in names
                )
    return tuple(name for name in JOB_FIELDS if name in wanted)


_UNREAD = dict.fromkeys(JOB_FIELDS)


def job_of_fields(row: dict[str, Any]) -> JobType:
    """A job of which only the selected fields were read: the query reads no other (the
    others hold None). Built without the constructor, which would check every field: 10,000
    jobs of a run cost a dict update each."""
    job = JobType.__new__(JobType)
    job.__dict__.update(_UNREAD)
    job.__dict__.update(row)
    return job
