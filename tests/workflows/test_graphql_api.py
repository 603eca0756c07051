"""Workflows over GraphQL: the same service as REST, errors with the contract's kinds."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from calcgraph.demo import workflow_document
from tests.packages.publishing import Bearer, demo_body, publish

pytestmark = pytest.mark.db


async def _gql(
    client: httpx.AsyncClient, headers: dict[str, str], query: str, **variables: Any
) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


CREATE = """
mutation($slug: String!, $graph: JSON!) {
  createWorkflow(slug: $slug, name: "Beam", graph: $graph, visibility: public) {
    slug visibility latestVersion latest { version resolvedFunctions inputNodes }
  }
}
"""


async def test_create_update_read_and_list(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    await publish(client, alice, demo_body(visibility="public"))
    created = await _gql(client, alice, CREATE, slug="beam", graph=workflow_document())
    workflow = created["data"]["createWorkflow"]
    assert workflow["visibility"] == "public"
    assert workflow["latest"]["version"] == 1
    assert len(workflow["latest"]["inputNodes"]) == 6
    updated = await _gql(
        client,
        alice,
        'mutation($g: JSON!) { updateWorkflow(slug: "beam", graph: $g) { latestVersion } }',
        g=workflow_document(),
    )
    assert updated["data"]["updateWorkflow"]["latestVersion"] == 2
    listing = await _gql(
        client, bearer("bob"), "{ workflows { items { slug latest { version } } nextCursor } }"
    )
    assert listing["data"]["workflows"]["items"] == [{"slug": "beam", "latest": {"version": 2}}]
    one = await _gql(client, bearer("bob"), '{ workflow(slug: "beam") { owner latestVersion } }')
    assert one["data"]["workflow"] == {"owner": "alice", "latestVersion": 2}


async def test_validation_report_in_extensions(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    await publish(client, alice, demo_body())
    ok = await _gql(
        client,
        alice,
        "query($g: JSON!) { validateWorkflow(graph: $g) { valid } }",
        g=workflow_document(),
    )
    assert ok["data"]["validateWorkflow"] == {"valid": True}
    graph = copy.deepcopy(workflow_document())
    graph["nodes"][6]["function"] = "demo-beam/nope"
    bad = await _gql(client, alice, CREATE, slug="beam", graph=graph)
    error = bad["errors"][0]
    assert error["extensions"]["code"] == "ValidationError"
    assert error["message"] == "ValidationError: workflow graph is invalid"
    assert error["extensions"]["report"]["unknown_functions"][0]["node_key"] == "beam"
