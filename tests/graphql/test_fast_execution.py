"""Lists of plain objects completed by `FastExecutionContext` answer exactly what graphql-core's
own completion answers: same data, same order, same errors, for every document below."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
import strawberry
from strawberry.scalars import JSON

from calcgraph.schema.fast_execution import Complete, FastExecutionContext

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@strawberry.type
class Leaf:
    id: strawberry.ID
    version: str


@strawberry.type
class Item:
    key: str
    count: int
    ratio: float | None
    when: datetime | None
    data: JSON | None
    leaf: Leaf | None
    required: str = "set"

    @strawberry.field
    def computed(self) -> str:
        return f"computed {self.key}"

    @strawberry.field
    async def later(self) -> int:
        return self.count * 2


def _items(broken: str | None = None) -> list[Item]:
    items = [
        Item(
            key=f"k{i}",
            count=i,
            ratio=None if i % 3 == 0 else i / 7,
            when=WHEN if i % 2 else None,
            data={"i": i, "nested": [i, {"x": None}]} if i % 4 else None,
            leaf=Leaf(id=strawberry.ID(f"l{i % 2}"), version="1.0.0") if i % 5 else None,
        )
        for i in range(12)
    ]
    if broken == "null":
        items[7].required = None  # type: ignore[assignment]
    if broken == "type":
        items[4].count = "four"  # type: ignore[assignment]
    return items


@strawberry.type
class Query:
    @strawberry.field
    def items(self, broken: str | None = None) -> list[Item]:
        return _items(broken)

    @strawberry.field
    async def later_items(self) -> list[Item]:
        return _items()

    @strawberry.field
    def maybe_items(self) -> list[Item | None]:
        items: list[Item | None] = list(_items())
        items[3] = None
        return items


DOCUMENTS = [
    "{ items { key count ratio when data required } }",
    "{ items { key leaf { id version } } laterItems { key leaf { version } } }",
    "{ items { __typename k: key c: count leaf { __typename id } } }",
    "{ items { ...F } } fragment F on Item { key leaf { ...L } } fragment L on Leaf { id }",
    "{ items { key computed later } }",
    "query($yes: Boolean!) { items { key count @include(if: $yes) ratio @skip(if: $yes) } }",
    "{ maybeItems { key } }",
    '{ items(broken: "null") { key required } }',
    '{ items(broken: "type") { key count } }',
    '{ items(broken: "null") { key } }',
]


def _schema(fast: bool) -> strawberry.Schema:
    if fast:
        return strawberry.Schema(query=Query, execution_context_class=FastExecutionContext)
    return strawberry.Schema(query=Query)


def _answer(result: Any) -> str:
    errors = [
        {"message": e.message, "path": e.path, "locations": str(e.locations)}
        for e in result.errors or []
    ]
    return json.dumps({"data": result.data, "errors": errors})  # keys in answer order


@pytest.mark.parametrize("document", DOCUMENTS)
async def test_fast_completion_answers_like_graphql_core(document: str) -> None:
    variables = {"yes": True} if "$yes" in document else None
    plain = await _schema(False).execute(document, variable_values=variables)
    fast = await _schema(True).execute(document, variable_values=variables)
    assert _answer(fast) == _answer(plain)
    assert plain.data is not None or plain.errors


async def test_fast_completion_serialises_every_leaf() -> None:
    result = await _schema(True).execute("{ items { key when data leaf { id } } }")
    assert result.errors is None
    assert result.data is not None
    first, second = result.data["items"][0], result.data["items"][1]
    assert first == {"key": "k0", "when": None, "data": None, "leaf": None}
    assert second == {
        "key": "k1",
        "when": "2026-01-02T03:04:05+00:00",
        "data": {"i": 1, "nested": [1, {"x": None}]},
        "leaf": {"id": "l1"},
    }


async def test_errors_in_a_list_are_reported_as_graphql_core_reports_them() -> None:
    result = await _schema(True).execute('{ items(broken: "null") { key required } }')
    assert result.data is None  # a non-null list item: the error bubbles to the nullable root
    assert result.errors is not None
    assert result.errors[0].path == ["items", 7, "required"]


class _Counting(FastExecutionContext):
    planned: ClassVar[list[bool]] = []

    def _plan(self, item_type: Any, details: Any) -> Complete | None:
        plan = super()._plan(item_type, details)
        _Counting.planned.append(plan is not None)
        return plan


@pytest.mark.parametrize(
    ("document", "planned"),
    [
        ("{ items { key count leaf { id version } } }", True),
        ("{ items { ...F } } fragment F on Item { key data }", True),
        ("{ items { key computed } }", False),
        ("{ items { key later } }", False),
    ],
)
async def test_plain_selections_take_the_plan(document: str, planned: bool) -> None:
    _Counting.planned.clear()
    schema = strawberry.Schema(query=Query, execution_context_class=_Counting)
    result = await schema.execute(document)
    assert result.errors is None
    assert _Counting.planned == [planned]
