"""The web app's GraphQL operations on events and webhooks: `recentEvents` (newest first, with
the cursor the subscription follows on from), the `events` subscription's `after` (nothing
recorded between a query and the subscription is missed), and the webhook fields calling the
REST routes' use cases (secret once, another user's webhook NotFound, a private destination
refused with the service's message, deliveries listed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.door.test_websocket import alice_run, bearer, receive, session
from tests.events.receiver import receiver
from tests.execution.conftest import Platform, default_sandbox, running_platform

pytestmark = pytest.mark.db

RECENT = """
query($types: [String!], $limit: Int!) {
  recentEvents(types: $types, limit: $limit) { items { id type subject time } nextCursor }
}
"""
FOLLOW = """
subscription($types: [String!], $after: String) {
  events(types: $types, after: $after) { id type subject data }
}
"""
CREATE = """
mutation($url: String!, $types: [String!]!, $description: String!) {
  createWebhook(url: $url, types: $types, description: $description) {
    secret webhook { id url types description enabled createdAt }
  }
}
"""
LIST = "query { webhooks(limit: 100) { items { id url enabled } nextCursor } }"
GET = "query($id: ID!) { webhook(id: $id) { id enabled } }"
UPDATE = "mutation($id: ID!, $on: Boolean) { updateWebhook(id: $id, enabled: $on) { id enabled } }"
TEST = "mutation($id: ID!) { testWebhook(id: $id) }"
DELETE = "mutation($id: ID!) { deleteWebhook(id: $id) }"
DELIVERIES = """
query($id: ID!) {
  webhookDeliveries(id: $id, limit: 50) {
    items { id eventId type attempt statusCode error durationMs attemptedAt state nextAttemptAt }
    nextCursor
  }
}
"""


@pytest.fixture(scope="module")
def served(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with serve(exec_url, identity_provider, tmp_path_factory.mktemp("served-gq")) as running:
        yield running


@pytest.fixture
async def hooks(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        default_sandbox(),
        webhook_allowed_hosts=["127.0.0.1"],
        webhook_dispatch_interval_seconds=0.1,
    ) as p:
        yield p


async def _gql(
    platform: Platform, query: str, variables: dict[str, Any] | None = None, user: str = "alice"
) -> dict[str, Any]:
    answer = await platform.client.post(
        "/graphql",
        json={"query": query, "variables": variables or {}},
        headers=platform.headers(user),
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_webhooks_over_graphql_secret_once_and_another_users_is_not_found(
    hooks: Platform,
) -> None:
    await hooks.user("alice")
    await hooks.user("bob")
    with receiver() as box:
        created = await _gql(
            hooks,
            CREATE,
            {"url": box.url, "types": ["calcgraph.run.*"], "description": "ops channel"},
        )
        assert "errors" not in created, created
        answer = created["data"]["createWebhook"]
        assert answer["secret"].startswith("whsec_")
        hook = answer["webhook"]
        assert hook["enabled"] is True
        assert hook["types"] == ["calcgraph.run.*"]
        assert hook["description"] == "ops channel"
        listed = (await _gql(hooks, LIST))["data"]["webhooks"]["items"]
        assert hook["id"] in [w["id"] for w in listed]
        # The secret is not a field of a webhook: a query naming it is refused.
        asked = await _gql(hooks, "query($id: ID!) { webhook(id: $id) { secret } }", hook)
        assert asked["errors"], asked

        # Bob: not listed, not readable, not changeable, not testable, not deletable.
        bobs = (await _gql(hooks, LIST, user="bob"))["data"]["webhooks"]["items"]
        assert hook["id"] not in [w["id"] for w in bobs]
        for query, variables in (
            (GET, {"id": hook["id"]}),
            (UPDATE, {"id": hook["id"], "on": False}),
            (TEST, {"id": hook["id"]}),
            (DELETE, {"id": hook["id"]}),
            (DELIVERIES, {"id": hook["id"]}),
        ):
            refused = await _gql(hooks, query, variables, user="bob")
            assert refused["errors"][0]["extensions"]["code"] == "NotFound", refused

        # A test event reaches the receiver; its attempt is listed with the status code.
        sent = await _gql(hooks, TEST, {"id": hook["id"]})
        event_id = sent["data"]["testWebhook"]
        assert box.wait_for(1), "the test event never arrived"
        for _ in range(300):
            items = (await _gql(hooks, DELIVERIES, {"id": hook["id"]}))["data"][
                "webhookDeliveries"
            ]["items"]
            if items and items[0]["state"] == "delivered":
                break
            await asyncio.sleep(0.1)
        first = items[0]
        assert first["eventId"] == event_id
        assert first["type"] == "calcgraph.webhook.test"
        assert first["statusCode"] == 204  # the receiver answers 204
        assert first["attempt"] == 1
        assert first["error"] is None
        assert first["durationMs"] is not None

        off = await _gql(hooks, UPDATE, {"id": hook["id"], "on": False})
        assert off["data"]["updateWebhook"]["enabled"] is False
        gone = await _gql(hooks, DELETE, {"id": hook["id"]})
        assert gone["data"]["deleteWebhook"] is True
        after = await _gql(hooks, GET, {"id": hook["id"]})
        assert after["errors"][0]["extensions"]["code"] == "NotFound"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://10.0.0.7/hook", "private"),
        ("http://169.254.169.254/latest", "link-local"),
        ("ftp://example.com/x", "http"),
    ],
)
async def test_a_refused_destination_answers_the_services_message(
    hooks: Platform, url: str, says: str
) -> None:
    await hooks.user("alice")
    answer = await _gql(hooks, CREATE, {"url": url, "types": ["*"], "description": ""})
    error = answer["errors"][0]
    assert error["extensions"]["code"] == "ValidationError", answer
    assert says in error["message"], error
    assert answer.get("data") is None


async def test_recent_events_are_newest_first_and_the_callers_only(hooks: Platform) -> None:
    await hooks.user("alice")
    await hooks.user("bob")
    with receiver() as box:
        made = []
        for name in ("one", "two"):
            created = await _gql(
                hooks, CREATE, {"url": box.url, "types": ["*"], "description": name}
            )
            made.append(created["data"]["createWebhook"]["webhook"]["id"])
        for hook in made:
            await _gql(hooks, TEST, {"id": hook})
    types = ["calcgraph.webhook.*"]
    page = (await _gql(hooks, RECENT, {"types": types, "limit": 2}))["data"]["recentEvents"]
    assert [e["subject"] for e in page["items"]] == list(reversed(made))
    assert int(page["nextCursor"]) > 0
    bobs = (await _gql(hooks, RECENT, {"types": types, "limit": 50}, user="bob"))["data"]
    assert not set(made) & {e["subject"] for e in bobs["recentEvents"]["items"]}
    for limit in (0, 101):
        refused = await _gql(hooks, RECENT, {"types": types, "limit": limit})
        assert refused["errors"][0]["extensions"]["code"] == "ValidationError"


async def test_the_subscription_follows_on_from_a_cursor_missing_nothing(served: Served) -> None:
    headers = bearer(served, "alice")
    async with httpx.AsyncClient(base_url=served.url, headers=headers) as http:
        answer = await http.post(
            "/graphql",
            json={"query": RECENT, "variables": {"types": ["calcgraph.run.*"], "limit": 1}},
        )
        cursor = answer.json()["data"]["recentEvents"]["nextCursor"]
    # The run is created before the subscription exists: `after` still brings its event.
    run_id = await alice_run(served)
    async with session(served, headers) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        variables = {"types": ["calcgraph.run.*"], "after": cursor}
        payload = {"query": FOLLOW, "variables": variables}
        await ws.send(json.dumps({"id": "f", "type": "subscribe", "payload": payload}))
        message = await receive(ws)
        assert message["type"] == "next", message
        event = message["payload"]["data"]["events"]
        assert event["type"] == "calcgraph.run.created"
        assert event["subject"] == run_id
