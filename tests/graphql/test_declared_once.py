"""GraphQL types read their fields from the domain views, and resolvers their shared argument
sets from one declaration: what each derivation gives (the SDL test checks the whole)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from strawberry.scalars import JSON

from calcgraph.domain.packages.views import DeploymentHistoryEntry, DeploymentStateView
from calcgraph.resolvers.arguments import arguments
from calcgraph.schema.deployments import DeploymentHistoryEntryType, DeploymentStateType
from calcgraph.schema.viewed import graphql_type

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_view_attribute_type_as_graphql_shows_it() -> None:
    assert graphql_type(str) is str
    assert graphql_type(int | None) == int | None
    assert graphql_type(dict[str, Any]) is JSON
    assert graphql_type(dict[str, float] | None) == JSON | None
    assert graphql_type(str | dict[str, str] | None) == JSON | None
    assert graphql_type(tuple[str, ...]) == list[str]


def test_a_type_keeps_its_view_and_shows_its_nested_views_as_their_types() -> None:
    entry = DeploymentHistoryEntry(version="1.0.0", action="deployed", at=NOW, reason=None)
    view = DeploymentStateView(
        package_id="p1",
        strategy="rolling",
        state="stable",
        current="1.0.0",
        candidate=None,
        traffic_split=None,
        started_at=None,
        ends_at=None,
        observed=None,
        history=(entry,),
    )
    shown = DeploymentStateType.from_view(view)
    assert shown.view is view
    assert [type(h) for h in shown.history] == [DeploymentHistoryEntryType]
    assert shown.history[0].view is entry
    assert (shown.package_id, shown.current, shown.history[0].version) == ("p1", "1.0.0", "1.0.0")


class _Window(TypedDict, total=False):
    limit: int | None
    cursor: str | None


async def test_an_argument_set_is_shown_where_it_is_named_and_reaches_the_resolver() -> None:
    @arguments(_Window, after="first")
    async def listing(
        info: object, first: str, last: str = "z", **window: Unpack[_Window]
    ) -> dict[str, object]:
        return {"first": first, "last": last, **window}

    parameters = inspect.signature(listing).parameters
    assert list(parameters) == ["info", "first", "limit", "cursor", "last"]
    assert parameters["limit"].default is None
    assert parameters["limit"].annotation == int | None
    assert parameters["last"].default == "z"
    answer = await listing(None, first="a", limit=3, cursor=None, last="b")
    assert answer == {"first": "a", "last": "b", "limit": 3, "cursor": None}
