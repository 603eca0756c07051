"""Workflows and versions over REST: save with the validation report, read, list, visibility."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from calcgraph.demo import workflow_document
from tests.packages.publishing import Bearer, demo_body, publish, small_body

pytestmark = pytest.mark.db


def _body(slug: str = "beam-check", graph: dict[str, Any] | None = None, **extra: Any) -> Any:
    return {"slug": slug, "name": "Beam check", "graph": graph or workflow_document(), **extra}


async def _demo(client: httpx.AsyncClient, bearer: Bearer, **extra: Any) -> dict[str, Any]:
    await publish(client, bearer("alice"), demo_body(visibility=extra.pop("package", None)))
    response = await client.post("/workflows", json=_body(**extra), headers=bearer("alice"))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


class TestCreate:
    async def test_demo_workflow_is_saved_with_resolved_functions(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        created = await _demo(client, bearer)
        assert created["slug"] == "beam-check"
        assert created["version"] == 1
        assert created["latest_version"] == 1
        assert created["visibility"] == "private"
        assert created["owner"] == "alice"
        assert set(created["resolved_functions"]) == {"beam", "strength", "stiffness", "verdict"}
        assert [n["node_key"] for n in created["input_nodes"]] == [
            "span",
            "load",
            "youngs_modulus",
            "second_moment",
            "section_modulus",
            "yield_stress",
        ]
        assert created["graph"] == workflow_document()

    async def test_duplicate_slug_is_409(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        await _demo(client, bearer)
        again = await client.post("/workflows", json=_body(), headers=bearer("alice"))
        assert again.status_code == 409
        assert again.json()["detail"].startswith("Conflict: ")

    async def test_invalid_graph_is_422_with_the_report(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(client, bearer("alice"), demo_body())
        graph = copy.deepcopy(workflow_document())
        graph["nodes"][0]["input_spec"]["type_expr"] = "Lenght"
        graph["nodes"][6]["function"] = "demo-beam/nope"
        del graph["nodes"][9]["input_bindings"]["length"]
        response = await client.post("/workflows", json=_body(graph=graph), headers=bearer("alice"))
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["detail"] == "ValidationError: workflow graph is invalid"
        report = body["report"]
        for key in (
            "invalid_input_node_types",
            "unknown_functions",
            "untyped_functions",
            "incompatible_edges",
            "unbound_ports",
            "cycles",
        ):
            assert key in report
        assert report["invalid_input_node_types"][0]["node_key"] == "span"
        assert report["unknown_functions"][0]["node_key"] == "beam"
        assert report["unbound_ports"] == [
            {
                "node_key": "stiffness",
                "port": "length",
                "reason": report["unbound_ports"][0]["reason"],
            }
        ]
        assert body["errors"]
        missing = await client.get("/workflows/beam-check", headers=bearer("alice"))
        assert missing.status_code == 404

    async def test_untyped_function_is_400_with_the_report(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(
            client,
            bearer("alice"),
            small_body("loose", "1.0.0", functions={"run": {"handler": "main:run"}}),
        )
        graph = {
            "nodes": [
                {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
                {
                    "node_key": "f",
                    "kind": "function",
                    "function": "loose/run",
                    "input_bindings": {
                        "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                    },
                },
            ]
        }
        response = await client.post(
            "/workflows", json=_body("loose", graph), headers=bearer("alice")
        )
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["detail"].startswith("InvalidRequest: ")
        assert body["report"]["untyped_functions"][0]["node_key"] == "f"

    async def test_hidden_function_is_unknown(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(client, bearer("bob"), demo_body())  # private to bob
        response = await client.post("/workflows", json=_body(), headers=bearer("alice"))
        assert response.status_code == 422
        unknown = {p["node_key"] for p in response.json()["report"]["unknown_functions"]}
        assert unknown == {"beam", "strength", "stiffness", "verdict"}

    async def test_bad_body_is_422(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        response = await client.post(
            "/workflows",
            json={"slug": "Bad Slug", "name": "x", "graph": {}},
            headers=bearer("alice"),
        )
        assert response.status_code == 422
        assert response.json()["errors"][0]["loc"] == ["body", "slug"]


class TestValidate:
    async def test_valid_and_invalid(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        await publish(client, bearer("alice"), demo_body())
        ok = await client.post(
            "/workflows/validate", json={"graph": workflow_document()}, headers=bearer("alice")
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["valid"] is True
        assert all(v == [] for v in ok.json()["report"].values())
        graph = copy.deepcopy(workflow_document())
        graph["nodes"][9]["input_bindings"]["length"] = {
            "source": "input_node",
            "input_key": "load",
            "from_port": "value",
        }
        bad = await client.post(
            "/workflows/validate", json={"graph": graph}, headers=bearer("alice")
        )
        assert bad.status_code == 422
        edges = bad.json()["report"]["incompatible_edges"]
        assert edges[0]["node_key"] == "stiffness"
        assert edges[0]["port"] == "length"


class TestReadAndVersions:
    async def test_get_put_and_list(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        created = await _demo(client, bearer)
        got = await client.get("/workflows/beam-check", headers=bearer("alice"))
        assert got.status_code == 200
        assert got.json()["version_id"] == created["version_id"]
        graph = workflow_document()
        graph["nodes"] = [n for n in graph["nodes"] if n["node_key"] != "verdict"]
        put = await client.put(
            "/workflows/beam-check", json={"graph": graph}, headers=bearer("alice")
        )
        assert put.status_code == 200, put.text
        assert put.json()["version"] == 2
        assert put.json()["version_id"] != created["version_id"]
        latest = await client.get("/workflows/beam-check", headers=bearer("alice"))
        assert latest.json()["version"] == 2
        assert "verdict" not in latest.json()["resolved_functions"]
        listing = await client.get("/workflows", headers=bearer("alice"))
        assert [w["slug"] for w in listing.json()["items"]] == ["beam-check"]
        assert listing.json()["next_cursor"] is None
        assert (await client.get("/workflows/nope", headers=bearer("alice"))).status_code == 404

    async def test_visibility_like_packages(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _demo(client, bearer)
        hidden = await client.get("/workflows/beam-check", headers=bearer("bob"))
        assert hidden.status_code == 403
        assert hidden.json()["detail"].startswith("PermissionDenied: ")
        assert (await client.get("/workflows", headers=bearer("bob"))).json()["items"] == []
        admin = await client.get("/workflows/beam-check", headers=bearer("root", roles=["admin"]))
        assert admin.status_code == 200
        put = await client.put(
            "/workflows/beam-check", json={"graph": workflow_document()}, headers=bearer("bob")
        )
        assert put.status_code == 403

    async def test_public_workflow_is_readable_not_writable(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _demo(client, bearer, visibility="public", package="public")
        assert (await client.get("/workflows/beam-check", headers=bearer("bob"))).status_code == 200
        listing = await client.get("/workflows", headers=bearer("bob"))
        assert [w["slug"] for w in listing.json()["items"]] == ["beam-check"]
        put = await client.put(
            "/workflows/beam-check", json={"graph": workflow_document()}, headers=bearer("bob")
        )
        assert put.status_code == 403

    async def test_internal_needs_an_organization(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await publish(client, bearer("alice"), demo_body())
        response = await client.post(
            "/workflows", json=_body(visibility="internal"), headers=bearer("alice")
        )
        assert response.status_code == 422

    async def test_needs_a_token(self, client: httpx.AsyncClient) -> None:
        assert (await client.get("/workflows")).status_code == 401
