"""Search and filters of the listings, applied in SQL beside the access rule, on both doors:
jobs by function, status and creation time; runs by start time; workflows, packages and
functions by name. Another user's rows never appear, whatever the filter; bad values answer
ValidationError (422 on REST). A job links its run and node, a run its workflow, a workflow
its last run, each in a statement count that does not grow with the page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion
from tests.access.factories import PackageRows, create_package, create_user
from tests.auth.idp import LocalIdentityProvider

pytestmark = pytest.mark.db

Bearer = Callable[..., dict[str, str]]
DAY = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


async def gql(
    client: httpx.AsyncClient, query: str, headers: dict[str, str], **variables: Any
) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def statements(engine: AsyncEngine) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
            seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine.sync_engine, "before_cursor_execute", count)


async def add_job(
    database: Database,
    rows: PackageRows,
    user: Principal,
    *,
    status: str = "success",
    created_at: datetime = DAY,
    run_id: str | None = None,
    node_key: str | None = None,
) -> str:
    async with database.write_session() as session:
        job = Job(
            function_id=rows.function_id,
            function_version_id=rows.function_version_id,
            package_id=rows.package_id,
            user_id=user.user_id,
            status=status,
            inputs={"x": 1},
            resolved_inputs={"x": 1},
            created_at=created_at,
            workflow_run_id=run_id,
            node_key=node_key,
        )
        session.add(job)
        await session.flush()
        return job.id


async def add_workflow(
    database: Database, owner: Principal, slug: str, visibility: str = "private"
) -> tuple[str, str]:
    async with database.write_session() as session:
        workflow = Workflow(
            slug=slug, name=f"{slug} name", owner_id=owner.user_id, visibility=visibility
        )
        session.add(workflow)
        await session.flush()
        version = WorkflowVersion(workflow_id=workflow.id, version=1, graph={"nodes": []})
        session.add(version)
        await session.flush()
        return workflow.id, version.id


async def add_run(
    database: Database,
    user: Principal,
    workflow: tuple[str, str],
    *,
    status: str = "completed",
    started_at: datetime = DAY,
) -> str:
    async with database.write_session() as session:
        run = WorkflowRun(
            workflow_id=workflow[0],
            workflow_version_id=workflow[1],
            user_id=user.user_id,
            status=status,
            inputs={},
            resolved_inputs={},
            plan_snapshot={"nodes": []},
            started_at=started_at,
        )
        session.add(run)
        await session.flush()
        return run.id


JOBS = """
query J($function: String, $status: [String!], $after: String, $before: String) {
  jobs(function: $function, status: $status, createdAfter: $after, createdBefore: $before) {
    items { id status nodeKey workflowRunId run { id status workflow { slug } } }
  }
}
"""


class TestJobs:
    async def test_filters_on_both_doors_never_show_another_users_jobs(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        beams = await create_package(database, alice, "beams", "public")
        slabs = await create_package(database, alice, "slabs", "public")
        old = await add_job(database, beams, alice, created_at=DAY - timedelta(days=3))
        failed = await add_job(database, beams, alice, status="failed")
        slab = await add_job(database, slabs, alice, created_at=DAY + timedelta(days=1))
        # Bob's jobs match every filter below; they never appear in Alice's answers.
        for _ in range(2):
            await add_job(database, beams, bob, status="failed")

        async def ids(**variables: Any) -> set[str]:
            body = await gql(client, JOBS, bearer("alice"), **variables)
            assert "errors" not in body, body
            return {j["id"] for j in body["data"]["jobs"]["items"]}

        assert await ids() == {old, failed, slab}
        assert await ids(function="BEAMS/sol") == {old, failed}
        assert await ids(function="slabs") == {slab}
        assert await ids(function="%") == set()  # a literal percent sign
        assert await ids(status=["failed"]) == {failed}
        assert await ids(after="2026-11-19") == {failed, slab}
        assert await ids(after="2026-11-19", before="2026-11-21") == {failed}
        assert await ids(before="2026-11-20T12:00:00Z") == {old}  # exclusive

        async def rest(**params: Any) -> set[str]:
            response = await client.get("/jobs", params=params, headers=bearer("alice"))
            assert response.status_code == 200, response.text
            return {j["id"] for j in response.json()["items"]}

        assert await rest(function="beams", status="failed") == {failed}
        assert await rest(created_after="2026-11-21") == {slab}
        assert await rest(created_before="2026-11-18T00:00:00+00:00") == {old}
        bob_sees = await client.get("/jobs", params={"status": "failed"}, headers=bearer("bob"))
        assert alice.user_id not in bob_sees.text
        assert {j["id"] for j in bob_sees.json()["items"]}.isdisjoint({old, failed, slab})

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"created_after": "yesterday"}, "created_after"),
            ({"created_before": "2026-13-40"}, "created_before"),
            ({"created_after": "2026-11-21", "created_before": "2026-11-20"}, "created_before"),
            ({"status": "cancelled"}, "status"),
            ({"function": "x" * 201}, "function"),
        ],
    )
    async def test_bad_filters_are_validation_errors(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        params: dict[str, str],
        field: str,
    ) -> None:
        response = await client.get("/jobs", params=params, headers=bearer("alice"))
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith("ValidationError: ")
        assert [e["loc"] for e in response.json()["errors"]] == [["query", field]]
        variables = {
            "after": params.get("created_after"),
            "before": params.get("created_before"),
            "status": [params["status"]] if "status" in params else None,
            "function": params.get("function"),
        }
        body = await gql(client, JOBS, bearer("alice"), **variables)
        assert [e["extensions"]["code"] for e in body["errors"]] == ["ValidationError"]

    async def test_no_token_is_refused(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/jobs", params={"function": "beams"})
        assert response.status_code == 401

    async def test_a_job_links_its_run_and_node_in_a_constant_statement_count(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
        statements: list[str],
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        beams = await create_package(database, alice, "beams", "public")
        direct = await add_job(database, beams, alice)
        counts = []
        for batch in (2, 6):
            for i in range(batch):
                workflow = await add_workflow(database, alice, f"wf-{batch}-{i}")
                run = await add_run(database, alice, workflow, status="running")
                await add_job(database, beams, alice, run_id=run, node_key=f"n{i}")
            await gql(client, "{ me { id } }", bearer("alice"))
            statements.clear()
            body = await gql(client, JOBS, bearer("alice"))
            assert "errors" not in body, body
            counts.append(len(statements))
        assert counts[0] == counts[1], counts
        items = body["data"]["jobs"]["items"]
        assert len(items) == 9
        linked = [j for j in items if j["id"] != direct]
        assert all(j["run"]["id"] == j["workflowRunId"] for j in linked)
        assert {j["run"]["workflow"]["slug"] for j in linked} >= {"wf-6-0", "wf-6-5"}
        assert {j["nodeKey"] for j in linked} == {f"n{i}" for i in range(6)}
        (lone,) = [j for j in items if j["id"] == direct]
        assert lone["run"] is None
        assert lone["nodeKey"] is None
        response = await client.get(f"/jobs/{linked[0]['id']}", headers=bearer("alice"))
        assert response.json()["workflow_run_id"] == linked[0]["workflowRunId"]


RUNS = """
query R($after: String, $before: String, $workflow: String) {
  workflowRuns(startedAfter: $after, startedBefore: $before, workflow: $workflow) {
    items { id workflow { slug } }
  }
}
"""


class TestRuns:
    async def test_start_range_on_both_doors_and_only_the_callers_runs(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        shared = await add_workflow(database, alice, "shared", "public")
        early = await add_run(database, alice, shared, started_at=DAY - timedelta(days=2))
        late = await add_run(database, alice, shared, started_at=DAY + timedelta(days=2))
        await add_run(database, bob, shared, started_at=DAY + timedelta(days=2))

        body = await gql(client, RUNS, bearer("alice"), after="2026-11-21")
        assert [r["id"] for r in body["data"]["workflowRuns"]["items"]] == [late]
        assert body["data"]["workflowRuns"]["items"][0]["workflow"] == {"slug": "shared"}
        body = await gql(client, RUNS, bearer("alice"), before="2026-11-21", workflow="shared")
        assert [r["id"] for r in body["data"]["workflowRuns"]["items"]] == [early]
        response = await client.get(
            "/workflow-runs", params={"started_after": "2026-11-21"}, headers=bearer("alice")
        )
        assert [r["id"] for r in response.json()["items"]] == [late]
        bad = await client.get(
            "/workflow-runs", params={"started_before": "soon"}, headers=bearer("alice")
        )
        assert bad.status_code == 422
        assert bad.json()["detail"].startswith("ValidationError: started_before must be")
        body = await gql(client, RUNS, bearer("alice"), after="2026-02-30")
        assert body["errors"][0]["extensions"]["code"] == "ValidationError"

    async def test_an_unknown_status_is_refused_alike_at_both_doors(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        rest = await client.get("/workflow-runs?status=bogus", headers=bearer("alice"))
        assert rest.status_code == 422
        assert rest.json()["detail"] == "ValidationError: unknown run status 'bogus'"
        body = await gql(
            client, '{ workflowRuns(status: ["bogus"]) { items { id } } }', bearer("alice")
        )
        (error,) = body["errors"]
        assert error["message"] == rest.json()["detail"]
        assert error["extensions"]["code"] == "ValidationError"

    async def test_a_hidden_workflow_answers_null_on_a_run(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        beams = await create_package(database, alice, "beams", "public")
        workflow = await add_workflow(database, alice, "alices", "private")
        run = await add_run(database, alice, workflow)
        job = await add_job(database, beams, alice, run_id=run, node_key="n")
        # Bob's run of Alice's private workflow (made when it was public) and its job: the
        # run is not Bob's to see through it, nor its workflow.
        bobs_run = await add_run(database, bob, workflow)
        bobs_job = await add_job(database, beams, bob, run_id=bobs_run, node_key="n")
        body = await gql(client, JOBS, bearer("bob"))
        (item,) = body["data"]["jobs"]["items"]
        assert item["id"] == bobs_job
        assert item["run"] is None
        body = await gql(client, JOBS, bearer("alice"))
        (item,) = body["data"]["jobs"]["items"]
        assert item["id"] == job
        assert item["run"]["workflow"] == {"slug": "alices"}


WORKFLOWS = """
query W($search: String) {
  workflows(search: $search) { items { slug lastRun { id status } } }
}
"""


class TestNames:
    async def test_name_search_on_both_doors_never_shows_hidden_rows(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        await create_package(database, alice, "beam_tools", "public")
        await create_package(database, alice, "beamxtools", "public")
        await create_package(database, bob, "beam-secret", "private")
        await add_workflow(database, alice, "beam-check", "public")
        await add_workflow(database, bob, "beam-hidden", "private")

        packages = await client.get("/packages", params={"search": "BEAM"}, headers=bearer("alice"))
        assert sorted(p["name"] for p in packages.json()["items"]) == ["beam_tools", "beamxtools"]
        literal = await client.get("/packages", params={"search": "m_t"}, headers=bearer("alice"))
        assert [p["name"] for p in literal.json()["items"]] == ["beam_tools"]
        functions = await client.get(
            "/functions", params={"search": "XTOOLS/sol"}, headers=bearer("alice")
        )
        assert [f["name"] for f in functions.json()["items"]] == ["solve"]
        body = await gql(
            client,
            '{ functions(search: "secret") { items { id } } packages(search: "secret") '
            "{ items { id } } }",
            bearer("alice"),
        )
        assert body["data"] == {"functions": {"items": []}, "packages": {"items": []}}
        workflows = await client.get(
            "/workflows", params={"search": "beam"}, headers=bearer("alice")
        )
        assert [w["slug"] for w in workflows.json()["items"]] == ["beam-check"]
        body = await gql(client, WORKFLOWS, bearer("alice"), search="NAME")
        assert [w["slug"] for w in body["data"]["workflows"]["items"]] == ["beam-check"]
        too_long = await client.get(
            "/workflows", params={"search": "x" * 201}, headers=bearer("alice")
        )
        assert too_long.status_code == 422
        assert too_long.json()["errors"][0]["loc"] == ["query", "search"]

    async def test_last_run_is_the_callers_own_in_a_constant_statement_count(
        self,
        client: httpx.AsyncClient,
        bearer: Bearer,
        database: Database,
        identity_provider: LocalIdentityProvider,
        statements: list[str],
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        counts = []
        latest: dict[str, str] = {}
        for batch in (2, 6):
            for i in range(batch):
                slug = f"wf-{batch}-{i}"
                workflow = await add_workflow(database, alice, slug, "public")
                await add_run(database, alice, workflow, status="completed")
                latest[slug] = await add_run(
                    database, alice, workflow, status="failed", started_at=DAY + timedelta(hours=1)
                )
                # Bob ran it later: Alice's last run is still her own.
                await add_run(database, bob, workflow, started_at=DAY + timedelta(hours=2))
            await add_workflow(database, alice, f"never-{batch}", "public")
            await gql(client, "{ me { id } }", bearer("alice"))
            statements.clear()
            body = await gql(client, WORKFLOWS, bearer("alice"))
            assert "errors" not in body, body
            counts.append(len(statements))
        assert counts[0] == counts[1], counts
        found = {w["slug"]: w["lastRun"] for w in body["data"]["workflows"]["items"]}
        assert found["never-2"] is None
        assert found["never-6"] is None
        for slug, run_id in latest.items():
            assert found[slug] == {"id": run_id, "status": "failed"}
        body = await gql(client, WORKFLOWS, bearer("bob"), search="wf-2-0")
        (item,) = body["data"]["workflows"]["items"]
        assert item["lastRun"]["status"] == "completed"  # Bob's own
        assert item["lastRun"]["id"] != latest["wf-2-0"]
