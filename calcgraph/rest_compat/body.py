"""Parse a request body into the pydantic model a route validates with."""

from __future__ import annotations

import json
from typing import TypeVar

import pydantic
from starlette.requests import Request

from calcgraph.domain import json_limits
from calcgraph.domain.errors import FieldError, ValidationError

T = TypeVar("T", bound=pydantic.BaseModel)


def _loc(parts: tuple[int | str, ...]) -> tuple[str | int, ...]:
    return ("body", *parts)


async def parse_body(request: Request, model: type[T]) -> T:
    raw = await request.body()
    if not raw.strip():
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
