"""Runs over REST without workers: creation freezes version, plan and inputs; reads; listing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from calcgraph.demo import DEMO_INPUTS, workflow_document
from tests.packages.publishing import Bearer, demo_body, publish

pytestmark = pytest.mark.db

NODES = {"beam", "root_moment", "strength", "stiffness", "verdict"}


async def _workflow(client: httpx.AsyncClient, bearer: Bearer, slug: str = "beam-check") -> None:
    await publish(client, bearer("alice"), demo_body())
    body = {"slug": slug, "name": "Beam", "graph": workflow_document()}
    response = await client.post("/workflows", json=body, headers=bearer("alice"))
    assert response.status_code == 201, response.text


async def _run(
    client: httpx.AsyncClient, bearer: Bearer, slug: str = "beam-check", user: str = "alice"
) -> dict[str, Any]:
    response = await client.post(
        f"/workflows/{slug}/runs", json={"inputs": DEMO_INPUTS}, headers=bearer(user)
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


class TestCreate:
    async def test_response_has_every_field(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _workflow(client, bearer)
        workflow = (await client.get("/workflows/beam-check", headers=bearer("alice"))).json()
        run = await _run(client, bearer)
        assert {
            "id",
            "workflow_version_id",
            "status",
            "started_at",
            "completed_at",
            "inputs",
            "terminal_outputs",
            "error_message",
            "first_failed_node_key",
            "plan_snapshot",
            "node_states",
        } <= set(run)
        assert run["workflow_version_id"] == workflow["version_id"]
        assert run["status"] == "pending"
        assert run["completed_at"] is None
        assert run["terminal_outputs"] is None
        assert run["error_message"] is None
        assert run["first_failed_node_key"] is None
        assert run["inputs"] == DEMO_INPUTS  # verbatim, units and all
        assert run["started_at"].endswith("Z")
        assert set(run["node_states"]) == NODES
        for state in run["node_states"].values():
            assert state["status"] == "pending"
            assert state["job_id"] is None
            assert state["attempt"] == 0
            assert {"outputs", "error", "started_at", "finished_at"} <= set(state)
        plan = run["plan_snapshot"]
        assert all(c["id"].startswith("chain-") for c in plan["chains"])
        assert {k for c in plan["chains"] for k in c["node_keys"]} == NODES - {"root_moment"}
        assert plan["waves"][0] == ["chain-0"]
        jobs = await client.get("/jobs", headers=bearer("alice"))
        assert jobs.json()["items"] == []  # nothing submitted before a tick

    async def test_inputs_are_checked_against_type_exprs(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _workflow(client, bearer)
        inputs = {**DEMO_INPUTS, "load": {"value": 3, "unit": "m"}, "extra": 1}
        del inputs["span"]
        response = await client.post(
            "/workflows/beam-check/runs", json={"inputs": inputs}, headers=bearer("alice")
        )
        assert response.status_code == 422
        body = response.json()
        assert body["detail"].startswith("ValidationError: ")
        assert "load" in body["detail"]
        locs = [tuple(e["loc"][:3]) for e in body["errors"]]
        assert ("body", "inputs", "load") in locs
        assert ("body", "inputs", "span") in locs
        assert ("body", "inputs", "extra") in locs

    async def test_later_versions_do_not_change_a_run(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _workflow(client, bearer)
        run = await _run(client, bearer)
        graph = workflow_document()
        graph["nodes"] = [n for n in graph["nodes"] if n["node_key"] != "verdict"]
        put = await client.put(
            "/workflows/beam-check", json={"graph": graph}, headers=bearer("alice")
        )
        assert put.status_code == 200
        again = await client.get(f"/workflow-runs/{run['id']}", headers=bearer("alice"))
        assert again.json()["plan_snapshot"] == run["plan_snapshot"]
        newer = await _run(client, bearer)
        assert newer["workflow_version_id"] == put.json()["version_id"]
        assert "verdict" not in newer["node_states"]

    async def test_unknown_or_hidden_workflow(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _workflow(client, bearer)
        missing = await client.post(
            "/workflows/nope/runs", json={"inputs": {}}, headers=bearer("alice")
        )
        assert missing.status_code == 404
        hidden = await client.post(
            "/workflows/beam-check/runs", json={"inputs": DEMO_INPUTS}, headers=bearer("bob")
        )
        assert hidden.status_code == 403


class TestRead:
    async def test_get_plan_list_and_no_delete(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        await _workflow(client, bearer)
        first = await _run(client, bearer)
        second = await _run(client, bearer)
        got = await client.get(f"/workflow-runs/{first['id']}", headers=bearer("alice"))
        assert got.status_code == 200
        assert got.json() == first
        plan = await client.get(f"/workflow-runs/{first['id']}/plan", headers=bearer("alice"))
        assert plan.status_code == 200
        assert plan.json()["plan"] == first["plan_snapshot"]
        assert set(plan.json()["node_states"]) == NODES
        listing = await client.get("/workflow-runs", headers=bearer("alice"))
        assert [r["id"] for r in listing.json()["items"]] == [second["id"], first["id"]]
        page = await client.get("/workflow-runs", params={"limit": 1}, headers=bearer("alice"))
        assert [r["id"] for r in page.json()["items"]] == [second["id"]]
        rest = await client.get(
            "/workflow-runs",
            params={"limit": 1, "cursor": page.json()["next_cursor"]},
            headers=bearer("alice"),
        )
        assert [r["id"] for r in rest.json()["items"]] == [first["id"]]
        pending = await client.get(
            "/workflow-runs",
            params=[("status", "pending"), ("status", "running"), ("workflow", "beam-check")],
            headers=bearer("alice"),
        )
        assert len(pending.json()["items"]) == 2
        done = await client.get(
            "/workflow-runs", params={"status": "completed"}, headers=bearer("alice")
        )
        assert done.json()["items"] == []
        bad = await client.get("/workflow-runs", params={"status": "nope"}, headers=bearer("alice"))
        assert bad.status_code == 422
        delete = await client.delete(f"/workflow-runs/{first['id']}", headers=bearer("alice"))
        assert delete.status_code == 405
        assert (await client.get("/workflow-runs/nope", headers=bearer("alice"))).status_code == 404

    async def test_runs_are_their_creators(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        await _workflow(client, bearer)
        run = await _run(client, bearer)
        other = await client.get(f"/workflow-runs/{run['id']}", headers=bearer("bob"))
        assert other.status_code == 403
        tick = await client.post(f"/workflow-runs/{run['id']}/tick", headers=bearer("bob"))
        assert tick.status_code == 403
        assert (await client.get("/workflow-runs", headers=bearer("bob"))).json()["items"] == []
        admin = bearer("root", roles=["admin"])
        assert (await client.get(f"/workflow-runs/{run['id']}", headers=admin)).status_code == 200
