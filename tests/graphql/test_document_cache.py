"""A query text is validated once per schema; refused texts stay refused, every time."""

from __future__ import annotations

from typing import Any

import pytest
import strawberry.schema.schema as strawberry_schema

from calcgraph.schema.build import build_schema
from calcgraph.settings import Settings

DEEP = '{ workflowRun(id: "r") { nodeStates { job { function { id } } } } }'


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    validate = strawberry_schema.validate

    def counting(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        return validate(*args, **kwargs)

    monkeypatch.setattr(strawberry_schema, "validate", counting)
    return seen


async def test_a_valid_text_is_validated_once(validations: list[int]) -> None:
    schema = build_schema()
    for _ in range(3):
        result = await schema.execute("{ __typename }")
        assert result.errors is None
        assert result.data == {"__typename": "Query"}
    assert len(validations) == 1
    other = await build_schema().execute("{ __typename }")  # another schema, its own cache
    assert other.errors is None
    assert len(validations) == 2


async def test_a_refused_text_is_refused_every_time(validations: list[int]) -> None:
    schema = build_schema(Settings.model_construct(graphql_max_depth=3))
    for _ in range(2):
        result = await schema.execute(DEEP)
        assert result.errors is not None
        assert "exceeds maximum operation depth" in result.errors[0].message
    assert len(validations) == 2
    unknown = await schema.execute("{ noSuchField }")
    assert unknown.errors is not None
    again = await schema.execute("{ noSuchField }")
    assert again.errors is not None
    assert again.errors[0].message == unknown.errors[0].message


async def test_the_parser_limits_still_apply() -> None:
    schema = build_schema(Settings.model_construct(graphql_max_tokens=10))
    long = "{ " + " ".join(["__typename"] * 20) + " }"
    for _ in range(2):
        result = await schema.execute(long)
        assert result.errors is not None
