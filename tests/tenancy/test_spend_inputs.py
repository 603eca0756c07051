"""Issue 27 (contract 8b, answers), a job's inputs: they may hold upstream outputs of many MiB,
so listings bound them as they do outputs. A listed job's inputs over 64 KiB are left out
(`inputs: null`, `inputs_omitted: true`; GraphQL `inputsOmitted`) in `GET /jobs`, GraphQL
`jobs` and a run's `nodeStates { job }` / `attemptJobs`, and read whole through
`GET /jobs/{id}`, `job(id)` or one node's `nodeState(key) { job }`; the answer stays within
16 MiB."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import NodeState, WorkflowRun
from tests.access.factories import create_package, create_user
from tests.auth.idp import LocalIdentityProvider
from tests.packages.publishing import small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

MIB = 1024 * 1024
ANSWER_MAX = 16 * MIB
BIG_NODES = 20  # 1 MiB of inputs each: 20 MiB together, over one answer
SMALL_NODES = 3


@dataclass
class InputsRun:
    run_id: str
    jobs: dict[str, str]
    """node key -> job id."""
    inputs: dict[str, dict[str, Any]]


@pytest.fixture
async def inputs_run(
    client: httpx.AsyncClient,
    bearer: Callable[..., dict[str, str]],
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> InputsRun:
    """A completed run whose node jobs got big inputs (an upstream's outputs) and small
    outputs."""
    headers = bearer("alice")
    alice = await create_user(database, identity_provider, "alice")
    rows = await create_package(database, alice, f"in-{uuid.uuid4().hex[:8]}", "private")
    pkg = f"inputs-{uuid.uuid4().hex[:8]}"
    published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
    assert published.status_code == 201, published.text
    sizes = {f"B{n:03d}": MIB for n in range(BIG_NODES)}
    sizes.update({f"S{n:03d}": 100 for n in range(SMALL_NODES)})
    graph = {"nodes": [inp("x"), *(fn(key, f"{pkg}/run", x="x") for key in sizes)]}
    slug = f"inputs-{uuid.uuid4().hex[:8]}"
    created = await client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
    )
    assert created.status_code == 201, created.text[:300]
    run = await client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers)
    assert run.status_code == 201, run.text[:300]
    run_id = run.json()["id"]
    jobs, inputs = {}, {}
    async with database.write_session() as session:
        for n, (key, size) in enumerate(sizes.items()):
            inputs[key] = {"x": f"{n:04d}" + "i" * (size - 4)}
            job = Job(
                function_id=rows.function_id,
                function_version_id=rows.function_version_id,
                package_id=rows.package_id,
                user_id=alice.user_id,
                status="success",
                inputs=inputs[key],
                resolved_inputs={"x": 1},
                outputs={"y": n},
                workflow_run_id=run_id,
                node_key=key,
                attempt=1,
            )
            session.add(job)
            await session.flush()
            jobs[key] = job.id
            await session.execute(
                update(NodeState)
                .where(NodeState.run_id == run_id, NodeState.node_key == key)
                .values(status="success", job_id=job.id, outputs={"y": n}, attempt=1, revision=99)
            )
        await session.execute(
            update(WorkflowRun)
            .where(WorkflowRun.id == run_id)
            .values(status="completed", terminal_outputs={}, revision=99)
        )
    return InputsRun(run_id, jobs, inputs)


async def _graphql(
    client: httpx.AsyncClient, headers: dict[str, str], query: str, **variables: Any
) -> httpx.Response:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text[:300]
    assert len(response.content) <= ANSWER_MAX
    return response


class TestNodeStatesJobInputs:
    async def test_a_run_s_node_jobs_leave_inputs_over_64_kib_out(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        inputs_run: InputsRun,
    ) -> None:
        query = """query($id: ID!) { workflowRun(id: $id) {
            nodeStates { nodeKey job { id inputs inputsOmitted outputs } } } }"""
        body = (await _graphql(client, bearer("alice"), query, id=inputs_run.run_id)).json()
        assert "errors" not in body, str(body)[:300]
        nodes = {n["nodeKey"]: n["job"] for n in body["data"]["workflowRun"]["nodeStates"]}
        assert set(nodes) == set(inputs_run.jobs)
        for key, job in nodes.items():
            assert job["id"] == inputs_run.jobs[key]
            if key.startswith("B"):
                assert job["inputs"] is None
                assert job["inputsOmitted"] is True
            else:
                assert job["inputs"] == inputs_run.inputs[key]
                assert job["inputsOmitted"] is False
            assert job["outputs"] is not None

    async def test_one_node_and_job_by_id_read_the_inputs_whole(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        inputs_run: InputsRun,
    ) -> None:
        headers = bearer("alice")
        query = """query($id: ID!) { workflowRun(id: $id) {
            nodeState(key: "B003") { job { inputs inputsOmitted } } } }"""
        body = (await _graphql(client, headers, query, id=inputs_run.run_id)).json()
        assert body["data"]["workflowRun"]["nodeState"]["job"] == {
            "inputs": inputs_run.inputs["B003"],
            "inputsOmitted": False,
        }
        query = "query($id: ID!) { job(id: $id) { inputs inputsOmitted } }"
        body = (await _graphql(client, headers, query, id=inputs_run.jobs["B004"])).json()
        assert body["data"]["job"] == {"inputs": inputs_run.inputs["B004"], "inputsOmitted": False}
        whole = await client.get(f"/jobs/{inputs_run.jobs['B005']}", headers=headers)
        assert whole.json()["inputs"] == inputs_run.inputs["B005"]
        assert whole.json()["inputs_omitted"] is False

    async def test_the_listings_of_jobs_leave_big_inputs_out(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        inputs_run: InputsRun,
    ) -> None:
        headers = bearer("alice")
        response = await client.get("/jobs", params={"limit": 100}, headers=headers)
        assert response.status_code == 200, response.text[:300]
        listed = {item["id"]: item for item in response.json()["items"]}
        assert set(listed) == set(inputs_run.jobs.values())  # one page: the big values are out
        query = "{ jobs(limit: 100) { items { id inputs inputsOmitted } } }"
        body = (await _graphql(client, headers, query)).json()
        graphql = {i["id"]: i for i in body["data"]["jobs"]["items"]}
        for key, job_id in inputs_run.jobs.items():
            big = key.startswith("B")
            assert listed[job_id]["inputs_omitted"] is big
            assert graphql[job_id]["inputsOmitted"] is big
            expected = None if big else inputs_run.inputs[key]
            assert listed[job_id]["inputs"] == expected
            assert graphql[job_id]["inputs"] == expected

    async def test_another_user_reads_none_of_them(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        inputs_run: InputsRun,
    ) -> None:
        mallory = bearer("mallory")
        query = """query($id: ID!) { workflowRun(id: $id) {
            nodeStates { job { inputs } } } }"""
        response = await client.post(
            "/graphql",
            json={"query": query, "variables": {"id": inputs_run.run_id}},
            headers=mallory,
        )
        assert "i" * 1000 not in response.text
        assert response.json().get("data", {}) in (None, {"workflowRun": None})
        listing = await client.get("/jobs", params={"limit": 100}, headers=mallory)
        assert listing.json() == {"items": [], "next_cursor": None}
        job = await client.get(f"/jobs/{inputs_run.jobs['S000']}", headers=mallory)
        assert job.status_code in (403, 404)


class TestEstimateCountsInputs:
    @pytest.mark.parametrize(
        "query",
        [
            "{ jobs(limit: 500) { items { inputs } } }",
            '{ workflowRun(id: "nope") { nodeStates(first: 300) { job { inputs } } } }',
        ],
    )
    async def test_a_wide_listing_of_inputs_is_refused_before_it_runs(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], query: str
    ) -> None:
        body = (await client.post("/graphql", json={"query": query}, headers=bearer())).json()
        assert body.get("data") is None, body
        [error] = body["errors"]
        assert error["extensions"]["code"] == "ValidationError", error
        assert "16 MiB" in error["message"]
