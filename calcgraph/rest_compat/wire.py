"""The wire of every REST feature: the answer base (`Out`, `Page`, the timestamps,
`as_viewed`, which derives an answer from its domain view), the error body (contract 2) and the
request bases and shared queries. Each feature's own bodies and answers sit beside its routes,
in `wire_<feature>.py` beside `routes_<feature>.py`; tests/openapi checks live answers against
the document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args, get_origin, get_type_hints

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from calcgraph.domain.listing.paging import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from calcgraph.domain.workflows.validation import Report
from calcgraph.rest_compat.parsing import BlankIsAbsent, Query, page_size, page_size_refusal

T = TypeVar("T")
S = TypeVar("S")

_DATE_TIME = WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization")

Timestamp = Annotated[
    datetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json"), _DATE_TIME
]
"""ISO 8601 with its offset, `2026-01-02T03:04:05+00:00` (jobs, packages, functions, users,
organizations)."""

TimestampZ = Annotated[datetime, _DATE_TIME]
"""ISO 8601 in UTC written `Z`, `2026-01-02T03:04:05Z` (workflows, runs, node states)."""


def is_none(value: object) -> bool:
    return value is None


def _wire(hint: Any) -> Any:
    """A view's field type as the answer writes it: a datetime as `Timestamp`, a tuple as a
    list."""
    if hint is datetime:
        return Timestamp
    if isinstance(hint, UnionType):
        wired = [_wire(arg) for arg in get_args(hint)]
        union = wired[0]
        for arg in wired[1:]:
            union = union | arg
        return union
    if get_origin(hint) is tuple:
        return list[get_args(hint)[0]]  # type: ignore[misc]
    return hint


def as_viewed(view: type, *, exclude: tuple[str, ...] = (), **types: Any) -> dict[str, Any]:
    """The fields of an answer that writes a dataclass view as it is: the view's fields in its
    order and with its types (`_wire`), but for those `types` gives and those left out. Assign
    it to the model's `__annotations__`, so the view stays the one declaration of the fields."""
    hints = get_type_hints(view)
    return {
        f.name: types.get(f.name, _wire(hints[f.name]))
        for f in fields(view)
        if f.name not in exclude
    }


def read_from(source: type[S], convert: Callable[[S], Any]) -> Any:
    """An answer's `before` validator: a domain value of type `source` is read as `convert`
    turns it (a dict of the answer's fields); anything else (a dict, a model) as it is. Assign
    it to a name in the model's body."""

    def read(cls: type[BaseModel], value: Any) -> Any:
        return convert(value) if isinstance(value, source) else value

    return model_validator(mode="before")(read)


def view_attributes(view: object) -> dict[str, Any]:
    """A dataclass view's fields, shallow, to merge with another view's."""
    return {f.name: getattr(view, f.name) for f in fields(view)}  # type: ignore[arg-type]


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page(Out, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: last")


class FieldErrorOut(Out):
    loc: list[str | int] = Field(description='where, e.g. ["body", "graph", "nodes", 0]')
    msg: str


class Problem(Out):
    model_config = ConfigDict(extra="allow")

    node_key: str | None = None
    port: str | None = Field(default=None, exclude_if=is_none)
    index: int | None = Field(
        default=None, exclude_if=is_none, description="position in `nodes`, where it helps"
    )
    reason: str


class ValidationReport(Out):
    """Every category, empty ones included (contract 2)."""

    invalid_input_node_types: list[Problem]
    unknown_functions: list[Problem]
    untyped_functions: list[Problem]
    incompatible_edges: list[Problem]
    unbound_ports: list[Problem]
    cycles: list[Problem]
    duplicate_node_keys: list[Problem]
    invalid_nodes: list[Problem]
    unknown_sources: list[Problem]
    unknown_ports: list[Problem]
    duplicate_bindings: list[Problem]
    invalid_retry_policies: list[Problem]
    deprecated_functions: list[Problem] = Field(
        default_factory=list,
        description="nodes on deprecated function versions: a notice, the graph stays valid",
    )

    _from_report = read_from(Report, Report.as_dict)


class ErrorBody(Out):
    """Contract section 2: every error answer (written by rest_compat.errors)."""

    detail: str = Field(description="'<Kind>: <message>', e.g. 'NotFound: no such workflow'")
    errors: list[FieldErrorOut] | None = Field(default=None, description="422 only")
    report: ValidationReport | None = Field(default=None, description="workflow graph refusals")


Visibility = Literal["private", "internal", "public"]


def _type_expression(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(
            "a type expression is a string such as 'list[Force]', or an object mapping "
            "field names to type expressions"
        )
    return value


TypeExpression = Annotated[str | dict[str, Any], BeforeValidator(_type_expression)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


VisibilityValue = Literal["private", "internal", "public"]
OrganizationSlug = Annotated[
    str | None, Field(max_length=100, description="owning organization's slug")
]
"""The organization that is to own a new package or workflow (unset: its creator alone)."""


class PageQuery(Query):
    """Listings (contract 4)."""

    limit: Annotated[int, BlankIsAbsent, page_size_refusal(MAX_LIMIT)] = page_size(
        DEFAULT_LIMIT, MAX_LIMIT
    )
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")

    def page(self) -> PageRequest:
        return PageRequest.parse(self.limit, self.cursor)


class SearchQuery(PageQuery):
    """Listings searched by name (`domain.listing.filters`)."""

    search: str | None = Field(
        default=None, description="a case-insensitive part of the name (at most 200 characters)"
    )


INSTANT_HELP = "an ISO 8601 date (midnight UTC) or date-time"
