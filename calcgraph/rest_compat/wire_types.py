"""Bodies and answers of the type routes."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasPath, ConfigDict, Field

from calcgraph.rest_compat.wire import Body, Out, TypeExpression


class TypeOut(Out):
    name: str
    parent: str | None
    kind: str
    unit: str | None = Field(validation_alias="unit_symbol")
    shape: str | None
    description: str


class ConnectionOut(Out):
    compatibility: Literal["ALLOWED", "REFUSED"] = Field(
        validation_alias=AliasPath("compatibility", "verdict")
    )
    reason: str = Field(validation_alias=AliasPath("compatibility", "reason"))
    source: str = Field(description="the source expression, normalised")
    target: str = Field(description="the target expression, normalised")


class CheckConnectionBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"source": "Force", "target": "Numeric"}]}
    )

    source: TypeExpression = Field(description="type expression of the source port")
    target: TypeExpression = Field(description="type expression of the target port")
