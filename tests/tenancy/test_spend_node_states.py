"""Issue 27, point 1 completed (contract 8b, answers): every answer that lists node states, a
run's (`GET /workflow-runs/{id}`, its plan, a tick) and GraphQL's `nodeStates`, stays within
16 MiB. A node's outputs over 64 KiB are left out (`outputs: null, outputs_omitted: true`), and
so are those past the answer's bound; each is read whole through its job (`GET /jobs/{id}`, the
node's `job`). The run's terminal outputs are shown whole when they fit, else left out
(`terminal_outputs_omitted`), each then its node's job's outputs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select, update

from calcgraph.db.dialect import TextBytes
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import NodeState, WorkflowRun
from tests.access.factories import create_package, create_user
from tests.auth.idp import LocalIdentityProvider
from tests.packages.publishing import small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

KIB, MIB = 1024, 1024 * 1024
ANSWER_MAX = 16 * MIB
BIG_NODES = 20  # 1 MiB each: over 64 KiB, always left out
FIT_NODES = 300  # 60 KiB each: 18 MiB together, more than one answer shows


def _value(n: int, size: int) -> dict[str, Any]:
    return {"y": f"{n:04d}" + "v" * (size - 4)}


@dataclass
class BigRun:
    run_id: str
    jobs: dict[str, str]
    """node key -> job id."""
    outputs: dict[str, dict[str, Any]]


async def _big_run(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    database: Database,
    identity_provider: LocalIdentityProvider,
    *,
    terminal_size: int,
) -> BigRun:
    """A completed run of 321 nodes whose outputs add up to 38 MiB, each node's value also its
    job's outputs; its terminal outputs `terminal_size` bytes."""
    alice = await create_user(database, identity_provider, "alice")
    rows = await create_package(database, alice, f"jobs-{uuid.uuid4().hex[:8]}", "private")
    pkg = f"nodes-{uuid.uuid4().hex[:8]}"
    published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
    assert published.status_code == 201, published.text
    sizes = {f"B{n:03d}": MIB for n in range(BIG_NODES)}
    sizes.update({f"S{n:03d}": 60 * KIB for n in range(FIT_NODES)})
    sizes["T"] = 100
    graph = {"nodes": [inp("x"), *(fn(key, f"{pkg}/run", x="x") for key in sizes)]}
    slug = f"nodes-{uuid.uuid4().hex[:8]}"
    created = await client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
    )
    assert created.status_code == 201, created.text[:300]
    run = await client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers)
    assert run.status_code == 201, run.text[:300]
    run_id = run.json()["id"]
    jobs, outputs = {}, {}
    async with database.write_session() as session:
        for n, (key, size) in enumerate(sizes.items()):
            outputs[key] = _value(n, size)
            job = Job(
                function_id=rows.function_id,
                function_version_id=rows.function_version_id,
                package_id=rows.package_id,
                user_id=alice.user_id,
                status="success",
                inputs={"x": 1},
                resolved_inputs={"x": 1},
                outputs=outputs[key],
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
                .values(
                    status="success", job_id=job.id, outputs=outputs[key], attempt=1, revision=99
                )
            )
        await session.execute(
            update(WorkflowRun)
            .where(WorkflowRun.id == run_id)
            .values(
                status="completed",
                terminal_outputs={"T": {"y": "t" * terminal_size}},
                revision=99,
            )
        )
    return BigRun(run_id, jobs, outputs)


@pytest.fixture
async def big_run(
    client: httpx.AsyncClient,
    bearer: Callable[..., dict[str, str]],
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> BigRun:
    return await _big_run(client, bearer("alice"), database, identity_provider, terminal_size=100)


def _check_states(states: dict[str, Any], big: BigRun) -> None:
    """Over 64 KiB left out; those shown are whole; some of the fitting ones left out (the
    bound), each left-out node still naming its job."""
    assert set(states) == set(big.jobs)
    for key in states:
        if key.startswith("B"):
            assert states[key]["outputs"] is None, key
            assert states[key]["outputs_omitted"] is True
    shown = [k for k, s in states.items() if not s["outputs_omitted"]]
    left = [k for k, s in states.items() if s["outputs_omitted"]]
    for key in shown:
        assert states[key]["outputs"] == big.outputs[key]
    for key in left:
        assert states[key]["outputs"] is None
        assert states[key]["job_id"] == big.jobs[key]
    fitting_left = [k for k in left if k.startswith("S")]
    assert fitting_left
    assert len(fitting_left) < FIT_NODES
    assert "T" in shown or "T" in left


class TestRunAnswersLeaveBigNodeOutputsOut:
    async def test_node_outputs_over_64_kib_in_a_run_answer(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        headers = bearer("alice")
        response = await client.get(f"/workflow-runs/{big_run.run_id}", headers=headers)
        assert response.status_code == 200, response.text[:300]
        assert len(response.content) <= ANSWER_MAX
        body = response.json()
        _check_states(body["node_states"], big_run)
        assert body["terminal_outputs"] == {"T": {"y": "t" * 100}}
        assert body["terminal_outputs_omitted"] is False
        whole = (await client.get(f"/jobs/{big_run.jobs['B000']}", headers=headers)).json()
        assert whole["outputs"] == big_run.outputs["B000"]

    async def test_node_outputs_over_64_kib_in_a_tick_answer(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        headers = bearer("alice")
        for params in ({}, {"since": 0}):
            response = await client.post(
                f"/workflow-runs/{big_run.run_id}/tick", params=params, headers=headers
            )
            assert response.status_code == 200, response.text[:300]
            assert len(response.content) <= ANSWER_MAX
            _check_states(response.json()["node_states"], big_run)

    async def test_node_outputs_over_64_kib_in_a_plan_answer(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        response = await client.get(
            f"/workflow-runs/{big_run.run_id}/plan", headers=bearer("alice")
        )
        assert response.status_code == 200, response.text[:300]
        assert len(response.content) <= ANSWER_MAX
        _check_states(response.json()["node_states"], big_run)

    async def test_outputs_over_64_kib_stay_in_the_database(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        database: Database,
        big_run: BigRun,
    ) -> None:
        """A run's answer, a tick's of the ended run (whole and `since`) and GraphQL's
        `nodeStates` read each node's outputs through the size stored with them (a generated
        column) and leave the big ones in the database, rather than reading 24 MiB to measure
        and drop it (the soak of issue 27: /health waited behind the decoding)."""
        async with database.read_session() as session:
            rows = (
                await session.execute(
                    select(NodeState.outputs_bytes, TextBytes(NodeState.outputs)).where(
                        NodeState.run_id == big_run.run_id
                    )
                )
            ).all()
        assert len(rows) == len(big_run.jobs)
        assert all(stored == measured > 0 for stored, measured in rows)
        statements: list[str] = []

        def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            statements.append(statement)

        headers = bearer("alice")
        query = "query($id: ID!) { workflowRun(id: $id) { nodeStates { nodeKey outputs } } }"
        event.listen(database.engine.sync_engine, "before_cursor_execute", seen)
        try:
            for path in ("", "/plan"):
                answer = await client.get(f"/workflow-runs/{big_run.run_id}{path}", headers=headers)
                assert answer.status_code == 200
            for params in ({}, {"since": 0}):
                ticked = await client.post(
                    f"/workflow-runs/{big_run.run_id}/tick", params=params, headers=headers
                )
                assert ticked.status_code == 200, ticked.text[:300]
                _check_states(ticked.json()["node_states"], big_run)
            graphql = await client.post(
                "/graphql",
                json={"query": query, "variables": {"id": big_run.run_id}},
                headers=headers,
            )
            assert "errors" not in graphql.json(), graphql.text[:300]
        finally:
            event.remove(database.engine.sync_engine, "before_cursor_execute", seen)
        reads = [text for text in statements if "node_states.outputs" in text]
        assert len(reads) >= 5, statements
        for text in reads:
            assert "node_states.outputs_bytes >" in text, text
        nodes = graphql.json()["data"]["workflowRun"]["nodeStates"]
        assert {n["nodeKey"] for n in nodes if n["outputs"] is None} >= {
            key for key in big_run.jobs if key.startswith("B")
        }

    async def test_another_user_reads_none_of_it(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        mallory = bearer("mallory")
        assert (
            await client.get(f"/workflow-runs/{big_run.run_id}", headers=mallory)
        ).status_code in (403, 404)
        assert (await client.get(f"/jobs/{big_run.jobs['B000']}", headers=mallory)).status_code in (
            403,
            404,
        )


class TestRunTerminalOutputs:
    async def test_terminal_outputs_past_the_bound_stay_in_the_database(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        """Terminal outputs past the answer bound are left out of every answer of the run (its
        answer, a tick's, GraphQL's), which says so; and they are not read to be dropped: every
        read of the run's row takes them through their stored size (the soak of issue 27: a
        run of three 8 MiB nodes decoded its 24 MiB terminal outputs at each read)."""
        headers = bearer("alice")
        big = await _big_run(client, headers, database, identity_provider, terminal_size=17 * MIB)
        statements: list[str] = []

        def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            statements.append(statement)

        query = """query($id: ID!) { workflowRun(id: $id) {
            terminalOutputs terminalOutputsOmitted } }"""
        event.listen(database.engine.sync_engine, "before_cursor_execute", seen)
        try:
            plan = await client.get(f"/workflow-runs/{big.run_id}/plan", headers=headers)
            assert plan.status_code == 200, plan.text[:300]
            answers = [await client.get(f"/workflow-runs/{big.run_id}", headers=headers)]
            for params in ({}, {"since": 0}):
                answers.append(
                    await client.post(
                        f"/workflow-runs/{big.run_id}/tick", params=params, headers=headers
                    )
                )
            graphql = await client.post(
                "/graphql", json={"query": query, "variables": {"id": big.run_id}}, headers=headers
            )
        finally:
            event.remove(database.engine.sync_engine, "before_cursor_execute", seen)
        assert len(graphql.content) <= ANSWER_MAX
        for response in answers:
            assert response.status_code == 200, response.text[:300]
            assert len(response.content) <= ANSWER_MAX
            answer = response.json()
            assert answer["terminal_outputs"] is None
            assert answer["terminal_outputs_omitted"] is True
        assert graphql.json()["data"]["workflowRun"] == {
            "terminalOutputs": None,
            "terminalOutputsOmitted": True,
        }
        reads = [text for text in statements if "workflow_runs.terminal_outputs" in text]
        assert len(reads) >= 4, statements
        for text in reads:
            assert "workflow_runs.terminal_outputs_bytes >" in text, text

    async def test_a_rerun_reuses_outputs_no_answer_showed(
        self,
        client: httpx.AsyncClient,
        bearer: Callable[..., dict[str, str]],
        database: Database,
        big_run: BigRun,
    ) -> None:
        """The tick's answer of an ended run leaves outputs over 64 KiB out; a re-run from the
        failure reads them whole, and its reused nodes keep them."""
        headers = bearer("alice")
        ticked = await client.post(f"/workflow-runs/{big_run.run_id}/tick", headers=headers)
        assert ticked.json()["node_states"]["B000"]["outputs_omitted"] is True
        rerun = await client.post(
            f"/workflow-runs/{big_run.run_id}/rerun", json={"from": "failure"}, headers=headers
        )
        assert rerun.status_code == 201, rerun.text[:300]
        async with database.read_session() as session:
            rows = (
                await session.execute(
                    select(NodeState.node_key, NodeState.outputs, NodeState.reused).where(
                        NodeState.run_id == rerun.json()["id"],
                        NodeState.node_key.in_(["B000", "B019", "S000"]),
                    )
                )
            ).all()
        assert {key: (outputs, reused) for key, outputs, reused in rows} == {
            key: (big_run.outputs[key], True) for key in ("B000", "B019", "S000")
        }


class TestGraphQLNodeStatesLeaveBigOutputsOut:
    async def test_node_states_outputs_over_64_kib_in_graphql(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        headers = bearer("alice")
        query = """query($id: ID!) { workflowRun(id: $id) { terminalOutputs
            nodeStates { nodeKey jobId outputs outputsOmitted
              job { id outputs outputsOmitted } } } }"""
        response = await client.post(
            "/graphql", json={"query": query, "variables": {"id": big_run.run_id}}, headers=headers
        )
        assert len(response.content) <= ANSWER_MAX
        body = response.json()
        assert "errors" not in body, str(body)[:300]
        nodes = body["data"]["workflowRun"]["nodeStates"]
        states = {
            n["nodeKey"]: {
                "outputs": n["outputs"],
                "outputs_omitted": n["outputsOmitted"],
                "job_id": n["jobId"],
            }
            for n in nodes
        }
        _check_states(states, big_run)
        for node in nodes:
            job = node["job"]
            if job["outputsOmitted"]:
                assert job["outputs"] is None
            else:
                assert job["outputs"] == big_run.outputs[node["nodeKey"]]

    async def test_one_node_reads_its_job_whole(
        self, client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], big_run: BigRun
    ) -> None:
        query = """query($id: ID!) { workflowRun(id: $id) {
            nodeState(key: "B003") { outputs outputsOmitted job { outputs outputsOmitted } } } }"""
        response = await client.post(
            "/graphql",
            json={"query": query, "variables": {"id": big_run.run_id}},
            headers=bearer("alice"),
        )
        node = response.json()["data"]["workflowRun"]["nodeState"]
        assert node["outputs"] is None
        assert node["outputsOmitted"] is True
        assert node["job"] == {"outputs": big_run.outputs["B003"], "outputsOmitted": False}
