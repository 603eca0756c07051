"""Issue 27, point 2 (contract 8b, quotas): per user, runs not yet terminal, nodes of a workflow
version, queued jobs and stored bytes are bounded by `CALCGRAPH_LIMIT_*`. Past a quota that
frees itself: 429 `QuotaExceeded: ...` with `Retry-After`; past the storage quota: 429 without;
a graph that can never fit: 422. Admins read who holds what through GraphQL `usage`. Small
limits here, set through the settings, so that each is seen to take effect."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs import changes
from calcgraph.domain.runs.models import NodeState, WorkflowRun
from calcgraph.settings import Settings
from tests.access.factories import create_package, create_user
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import default_sandbox, running_platform
from tests.packages.publishing import small_body
from tests.tenancy.test_spend_answers import add_jobs
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

Headers = Callable[..., dict[str, str]]


@pytest.fixture
async def limited(settings: Settings, database: Database) -> AsyncIterator[httpx.AsyncClient]:
    small = settings.model_copy(
        update={
            "limit_runs_per_user": 2,
            "limit_nodes_per_workflow": 4,
            "limit_queued_jobs_per_user": 2,
            "limit_stored_bytes_per_user": 64 * 1024,
        }
    )
    app = create_app(small, database)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


async def package(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    name = f"quota-{uuid.uuid4().hex[:8]}"
    response = await client.post("/packages", json=small_body(name, "1.0.0"), headers=headers)
    assert response.status_code == 201, response.text
    return name


async def workflow(client: httpx.AsyncClient, headers: dict[str, str], pkg: str) -> str:
    slug = f"quota-{uuid.uuid4().hex[:8]}"
    graph = {"nodes": [inp("x"), fn("A", f"{pkg}/run", x="x")]}
    body = {"slug": slug, "name": slug, "graph": graph}
    response = await client.post("/workflows", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return slug


def quota_refusal(response: httpx.Response, *, retry: bool) -> str:
    assert response.status_code == 429, response.text
    detail: str = response.json()["detail"]
    assert detail.startswith("QuotaExceeded: ")
    assert ("Retry-After" in response.headers) is retry
    return detail


class TestNodesPerWorkflow:
    async def test_a_graph_over_the_node_quota_never_fits(
        self, limited: httpx.AsyncClient, bearer: Headers
    ) -> None:
        headers = bearer("alice")
        pkg = await package(limited, headers)
        nodes = [inp("x"), *(fn(f"N{i}", f"{pkg}/run", x="x") for i in range(4))]
        body = {"slug": "too-big", "name": "too big", "graph": {"nodes": nodes}}
        response = await limited.post("/workflows", json=body, headers=headers)
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith("ValidationError: ")
        assert "at most 4" in response.json()["detail"]
        slug = await workflow(limited, headers, pkg)
        again = await limited.put(
            f"/workflows/{slug}", json={"graph": {"nodes": nodes}}, headers=headers
        )
        assert again.status_code == 422, again.text
        mutation = (
            'mutation($g: JSON!) { createWorkflow(slug: "gq-big", name: "x", graph: $g) { slug } }'
        )
        body = {"query": mutation, "variables": {"g": {"nodes": nodes}}}
        answer = (await limited.post("/graphql", json=body, headers=headers)).json()
        assert answer["errors"][0]["extensions"]["code"] == "ValidationError"


class TestRunsPerUser:
    async def test_runs_not_yet_terminal_are_bounded(
        self, limited: httpx.AsyncClient, bearer: Headers
    ) -> None:
        headers = bearer("alice")
        slug = await workflow(limited, headers, await package(limited, headers))
        for _ in range(2):  # nothing ticks them: they stay pending
            created = await limited.post(
                f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
            )
            assert created.status_code == 201, created.text
        refused = await limited.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
        )
        assert "2 runs not yet terminal" in quota_refusal(refused, retry=True)
        mutation = (
            f'mutation {{ createWorkflowRun(workflow: "{slug}", inputs: {{x: 1}}) {{ id }} }}'
        )
        answer = (await limited.post("/graphql", json={"query": mutation}, headers=headers)).json()
        assert answer["errors"][0]["extensions"]["code"] == "QuotaExceeded"
        # Another user's quota is their own.
        bob = bearer("bob")
        other = await workflow(limited, bob, await package(limited, bob))
        ok = await limited.post(f"/workflows/{other}/runs", json={"inputs": {"x": 1}}, headers=bob)
        assert ok.status_code == 201, ok.text


class TestJobsPerUser:
    async def test_queued_jobs_are_bounded(
        self, limited: httpx.AsyncClient, bearer: Headers
    ) -> None:
        headers = bearer("alice")
        pkg = await package(limited, headers)
        path = f"/packages/{pkg}/functions/run/execute"
        for n in range(2):  # no worker runs in this app: they stay queued
            queued = await limited.post(
                path, json={"inputs": {"x": n}}, params={"wait": 0}, headers=headers
            )
            assert queued.status_code == 202, queued.text
        refused = await limited.post(
            path, json={"inputs": {"x": 9}}, params={"wait": 0}, headers=headers
        )
        assert "2 jobs queued" in quota_refusal(refused, retry=True)
        mutation = (
            f'mutation {{ executeFunction(package: "{pkg}", function: "run", '
            "inputs: {x: 3}, wait: 0) { id } }"
        )
        answer = (await limited.post("/graphql", json={"query": mutation}, headers=headers)).json()
        assert answer["errors"][0]["extensions"]["code"] == "QuotaExceeded"

    async def test_stored_bytes_are_bounded(
        self,
        limited: httpx.AsyncClient,
        bearer: Headers,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        rows = await create_package(database, alice, f"store-{uuid.uuid4().hex[:8]}", "private")
        await add_jobs(database, rows, alice.user_id, 1, size=40 * 1024, incompressible=True)
        headers = bearer("alice")
        pkg = await package(limited, headers)
        refused = await limited.post(
            f"/packages/{pkg}/functions/run/execute",
            json={"inputs": {"x": 1}},
            params={"wait": 0},
            headers=headers,
        )
        assert "the most one user may store" in quota_refusal(refused, retry=False)


class TestUsage:
    async def test_admins_see_who_holds_what(
        self, limited: httpx.AsyncClient, bearer: Headers
    ) -> None:
        headers = bearer("carol")
        slug = await workflow(limited, headers, await package(limited, headers))
        run = await limited.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
        )
        assert run.status_code == 201, run.text
        query = "{ usage { username unfinishedRuns jobs queuedJobs storedBytes } }"
        admin = bearer("root", roles=["admin", "user"])
        answer: dict[str, Any] = (
            await limited.post("/graphql", json={"query": query}, headers=admin)
        ).json()
        assert "errors" not in answer, answer
        [carol] = [u for u in answer["data"]["usage"] if u["username"] == "carol"]
        assert carol["unfinishedRuns"] == 1

    async def test_a_user_may_not(self, limited: httpx.AsyncClient, bearer: Headers) -> None:
        query = "{ usage { username storedBytes } }"
        answer = (await limited.post("/graphql", json={"query": query}, headers=bearer())).json()
        assert answer["errors"][0]["extensions"]["code"] == "PermissionDenied"


BIG_CODE = "def big(n):\n    return {'y': 'x' * int(n)}\n"


class TestStoredResults:
    async def test_a_result_past_the_storage_quota_fails_quota_exceeded(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        user = f"store-{uuid.uuid4().hex[:6]}"
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            default_sandbox(),
            limit_stored_bytes_per_user=100_000,
        ) as platform:
            headers = platform.headers(user)
            name = f"big-{uuid.uuid4().hex[:8]}"
            body = small_body(
                name, "1.0.0", code=BIG_CODE, functions={"big": {"handler": "main:big"}}
            )
            published = await platform.client.post("/packages", json=body, headers=headers)
            assert published.status_code == 201, published.text
            path = f"/packages/{name}/functions/big/execute"
            small = await platform.execute(path, {"n": 10}, wait=60, headers=headers)
            assert small.json()["status"] == "success", small.text
            big = await platform.execute(path, {"n": 150_000}, wait=60, headers=headers)
            job = big.json()
            assert job["status"] == "failed", big.text[:300]
            assert job["error"]["kind"] == "quota_exceeded"
            stored = (await platform.client.get(f"/jobs/{job['job_id']}", headers=headers)).json()
            assert stored["outputs"] is None


class TestTickSubmissionsWithinTheQueuedJobsQuota:
    async def test_tick_submissions_beyond_the_queued_jobs_quota_stay_pending(
        self, limited: httpx.AsyncClient, bearer: Headers, database: Database
    ) -> None:
        """Three ready nodes, room for two queued jobs: the tick submits two, the third stays
        pending (deferred like a retry, the run's `retry_at` set) and the run does not fail;
        once a job has started and the deferral is due, a tick submits it."""
        headers = bearer("alice")
        pkg = await package(limited, headers)
        slug = f"fan-{uuid.uuid4().hex[:8]}"
        graph = {"nodes": [inp("x"), *(fn(k, f"{pkg}/run", x="x") for k in "ABC")]}
        created = await limited.post(
            "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
        )
        assert created.status_code == 201, created.text
        run = await limited.post(
            f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
        )
        run_id = run.json()["id"]
        first = (await limited.post(f"/workflow-runs/{run_id}/tick", headers=headers)).json()
        states = first["node_states"]
        running = sorted(k for k, s in states.items() if s["status"] == "running")
        pending = sorted(k for k, s in states.items() if s["status"] == "pending")
        assert running == ["A", "B"]
        assert pending == ["C"]
        assert states["C"]["retry_at"] is not None
        assert first["status"] == "running"
        assert first["retry_at"] is not None
        assert await _queued(database, run_id) == 2
        again = (await limited.post(f"/workflow-runs/{run_id}/tick", headers=headers)).json()
        assert again["node_states"]["C"]["status"] == "pending"
        assert await _queued(database, run_id) == 2
        # A job starts (a worker took it) and the deferral is due: the third is submitted.
        async with database.write_session() as session:
            job_id = states["A"]["job_id"]
            await session.execute(update(Job).where(Job.id == job_id).values(status="running"))
            past = datetime.now(UTC) - timedelta(seconds=1)
            await session.execute(
                update(NodeState)
                .where(NodeState.run_id == run_id, NodeState.node_key == "C")
                .values(retry_at=past)
            )
            await session.execute(
                update(WorkflowRun)
                .where(WorkflowRun.id == run_id)
                .values(retry_at=past, revision=WorkflowRun.revision + 1)
            )
            # As every unit of work that changes a run does: its kept tick answer is stale.
            changes.changed(run_id)
        third = (await limited.post(f"/workflow-runs/{run_id}/tick", headers=headers)).json()
        assert third["node_states"]["C"]["status"] == "running"
        assert third["node_states"]["C"]["attempt"] == 1
        assert await _queued(database, run_id) == 2


async def _queued(database: Database, run_id: str) -> int:
    async with database.read_session() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.workflow_run_id == run_id, Job.status == "queued")
        )
    return int(count or 0)
