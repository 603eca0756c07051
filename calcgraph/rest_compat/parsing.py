"""Parse a request's query and body into the pydantic models its operation declares. A refusal
is the contract's 422 ValidationError (rendered by rest_compat.errors), located under "query"
or "body"; a query parameter may declare its own wording with Refusal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar, get_origin

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticUseDefault
from starlette.datastructures import QueryParams
from starlette.requests import Request

from calcgraph.domain import json_limits
from calcgraph.domain.errors import FieldError, ValidationError

T = TypeVar("T", bound=BaseModel)
Q = TypeVar("Q", bound="Query")


class Query(BaseModel):
    """Query parameters: unknown ones are ignored, a list field reads a repeated parameter."""

    model_config = ConfigDict(extra="ignore")


@dataclass(frozen=True)
class Refusal:
    """How a query parameter's bad value is refused: the detail's `message` (which may name
    the value as {value!r}) and the `msg` of its entry in `errors`. Without one, pydantic's
    wording is used."""

    message: str
    msg: str


def _blank_is_absent(value: object) -> object:
    if value == "":
        raise PydanticUseDefault()
    return value


BlankIsAbsent = BeforeValidator(_blank_is_absent)
"""`?name=` means the parameter's default, as if it were not sent."""


def page_size_refusal(most: int) -> Refusal:
    """How a listing's `limit` outside 1 to `most` is refused."""
    return Refusal(f"limit must be an integer from 1 to {most}", f"an integer from 1 to {most}")


def page_size(default: int, most: int) -> Any:
    """A listing's `limit` field: 1 to `most`, `default` when absent or blank (with
    `Annotated[int, BlankIsAbsent, page_size_refusal(most)]`)."""
    return Field(default=default, ge=1, le=most, description="page size")


@cache
def _fields(model: type[Query]) -> tuple[tuple[str, bool], ...]:
    """Each parameter's name, and whether it is a list (read from a repeated parameter)."""
    return tuple(
        (name, get_origin(info.annotation) is list) for name, info in model.model_fields.items()
    )


def _refusal(model: type[BaseModel], name: str) -> Refusal | None:
    info = model.model_fields.get(name)
    found = [m for m in info.metadata if isinstance(m, Refusal)] if info is not None else []
    return found[0] if found else None


def parse_query(params: QueryParams, model: type[Q]) -> Q:
    raw: dict[str, Any] = {
        name: params.getlist(name) if many else params[name]
        for name, many in _fields(model)
        if name in params
    }
    try:
        return model.model_validate(raw)
    except pydantic.ValidationError as exc:
        errors: list[FieldError] = []
        messages: list[str] = []
        for err in exc.errors():
            name = str(err["loc"][0])
            if any(e.loc[1] == name for e in errors):
                continue  # one entry per parameter (a repeated one may fail more than once)
            refusal = _refusal(model, name)
            if refusal is not None:
                errors.append(FieldError(("query", name), refusal.msg))
                messages.append(refusal.message.format(value=err.get("input")))
            else:
                errors.append(FieldError(("query", *err["loc"]), err["msg"]))
                messages.append(f"invalid query parameter {name}: {err['msg']}")
        raise ValidationError(messages[0], errors) from None


def _loc(parts: tuple[int | str, ...]) -> tuple[str | int, ...]:
    return ("body", *parts)


async def parse_body(request: Request, model: type[T], *, required: bool = True) -> T:
    raw = await request.body()
    if not raw.strip():
        if not required:
            return model()
        raise ValidationError(
            "request body is empty; send a JSON object",
            [FieldError(("body",), "empty body")],
        )
    try:
        data = json_limits.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise ValidationError(
            f"request body is not valid JSON: {reason}{where}",
            [FieldError(("body",), f"invalid JSON: {reason}{where}")],
        ) from None
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = [FieldError(_loc(tuple(err["loc"])), err["msg"]) for err in exc.errors()]
        summary = "; ".join(
            f"{'.'.join(str(p) for p in err.loc[1:]) or 'body'}: {err.msg}" for err in errors
        )
        raise ValidationError(f"invalid request body: {summary}", errors) from None
