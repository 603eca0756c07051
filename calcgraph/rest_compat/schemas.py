"""Request bodies of the REST routes, as pydantic models (the OpenAPI document uses them too)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


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


class CheckConnectionBody(Body):
    source: TypeExpression = Field(description="type expression of the source port")
    target: TypeExpression = Field(description="type expression of the target port")
