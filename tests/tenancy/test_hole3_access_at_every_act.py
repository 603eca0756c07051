"""Issue 12, hole 3: access is decided at every act, not just at creation (contract section 3
and 8).

- A tick submits a node's job only if the run's owner may still execute its function now: a
  run started while the owner could see a function stops there, with the node failed
  `permission_denied`, once the package went private or the owner left its organization.
- A chain worker going on to its next node checks the same right first.
- Nested GraphQL fields apply the top-level rules: a run's node's `job` is null when
  `GET /jobs/{id}` would refuse it.
- The result cache is per user: bob's identical call is never answered from alice's result.

Real workers and sandboxes over a committed temporary database, on both databases; runs are
driven by long-poll ticks as a client drives them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, event

from calcgraph.db.engine import Database
from calcgraph.domain.access import policy
from calcgraph.domain.access.models import Membership
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from tests.access.factories import (
    create_organization,
    create_package,
    create_user,
    set_visibility,
)
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import (  # noqa: F401  (exec_url: the committed database)
    Platform,
    default_sandbox,
    exec_url,
    running_platform,
)
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS, TERMINAL, _status, _until
from tests.sandbox.conftest import SELECTED, _make_backend
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

ADMIN = ("admin", "user")


@pytest.fixture
async def node_platform(
    exec_url: str,  # noqa: F811  (the fixture imported above)
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    """One job per node, each submitted by a tick: the tick's own check."""
    async with running_platform(
        exec_url, identity_provider, tmp_path, default_sandbox(), chain_execution="node"
    ) as platform:
        yield platform


@pytest.fixture
async def chain_platform(
    exec_url: str,  # noqa: F811  (the fixture imported above)
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    """A chain runs on one worker without a tick between its nodes: the worker's check."""
    async with running_platform(
        exec_url, identity_provider, tmp_path, default_sandbox(), chain_execution="chain"
    ) as platform:
        yield platform


@pytest.fixture(params=SELECTED)
async def every_sandbox_platform(
    request: pytest.FixtureRequest,
    exec_url: str,  # noqa: F811  (the fixture imported above)
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    """Node execution on each sandbox backend the machine has (the rules are the platform's,
    whichever backend runs the code)."""
    name = str(request.param)
    found = _make_backend(name)
    if isinstance(found, str):
        pytest.skip(found)
    async with running_platform(
        exec_url, identity_provider, tmp_path, name, chain_execution="node"
    ) as platform:
        yield platform


async def _package(
    platform: Platform, user: str, visibility: str, organization: str | None = None
) -> tuple[str, str]:
    """(name, id) of a fresh package of `user` with the run tests' functions."""
    name = f"acc-{uuid.uuid4().hex[:8]}"
    body = small_body(
        name,
        "1.0.0",
        code=CODE,
        functions=FUNCTIONS,
        visibility=visibility,
        organization=organization,
    )
    report = await publish(platform.client, platform.headers(user), body)
    return name, str(report["package_id"])


async def _set_visibility(platform: Platform, user: str, package_id: str, to: str) -> None:
    response = await platform.client.patch(
        f"/packages/{package_id}", json={"visibility": to}, headers=platform.headers(user)
    )
    assert response.status_code == 200, response.text


async def _start(platform: Platform, nodes: list[dict[str, Any]], x: float) -> str:
    """Alice's own private workflow of `nodes`, and a run of it (nothing submitted yet)."""
    slug = f"wf-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    created = await platform.client.post("/workflows", json=body, headers=platform.headers())
    assert created.status_code == 201, created.text
    run = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": x}}, headers=platform.headers()
    )
    assert run.status_code == 201, run.text
    return str(run.json()["id"])


async def _tick(platform: Platform, run_id: str) -> dict[str, Any]:
    response = await platform.client.post(
        f"/workflow-runs/{run_id}/tick", headers=platform.headers()
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _gql(platform: Platform, query: str, user: str = "alice", **variables: Any) -> Any:
    roles = ADMIN if user == "admin" else ("user",)
    response = await platform.client.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers=platform.headers(user, roles),
    )
    assert response.status_code == 200, response.text
    return response.json()


async def _claimed(platform: Platform, job_id: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        job = await platform.client.get(f"/jobs/{job_id}", headers=platform.headers())
        assert job.status_code == 200, job.text
        if job.json()["status"] != "queued":
            return
        assert time.monotonic() < deadline, "no worker claimed the chain's job"
        await asyncio.sleep(0.02)


def _assert_refused(run: dict[str, Any], node: str) -> None:
    """The run failed at `node`, refused before any job existed, and handed back nothing."""
    assert run["status"] == "failed", run
    assert run["first_failed_node_key"] == node, run
    assert run["terminal_outputs"] is None, run
    state = run["node_states"][node]
    assert state["status"] == "failed", state
    assert state["error"]["kind"] == "permission_denied", state
    assert state["outputs"] is None, state


class TestTickChecksTheOwnerNow:
    async def test_a_function_gone_private_mid_run_fails_its_node(
        self, every_sandbox_platform: Platform
    ) -> None:
        platform = every_sandbox_platform
        mine, _ = await _package(platform, "alice", "private")
        bobs, bobs_id = await _package(platform, "bob", "public")
        # n0 runs alice's own function; n1, after it, runs bob's public one.
        run_id = await _start(
            platform,
            [inp("x"), fn("n0", f"{mine}/inc", x="x"), fn("n1", f"{bobs}/inc", x="n0.y")],
            1,
        )
        first = await _tick(platform, run_id)
        assert _status(first) == {"n0": "running", "n1": "pending"}
        await _set_visibility(platform, "bob", bobs_id, "private")

        run = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)

        _assert_refused(run, "n1")
        assert run["node_states"]["n0"]["status"] == "success"
        assert run["node_states"]["n1"]["job_id"] is None  # never submitted
        assert "permission_denied" in run["error_message"]

    async def test_the_owner_removed_from_the_organization_mid_run(
        self, node_platform: Platform
    ) -> None:
        platform = node_platform
        slug = f"org-{uuid.uuid4().hex[:8]}"
        headers = platform.headers
        await platform.client.get("/packages", headers=headers("alice"))  # alice exists
        created = await platform.client.post(
            "/organizations", json={"slug": slug, "name": slug}, headers=headers("bob")
        )
        assert created.status_code == 201, created.text
        added = await platform.client.post(
            f"/organizations/{slug}/members",
            json={"username": "alice", "role": "member"},
            headers=headers("bob"),
        )
        assert added.status_code == 201, added.text
        mine, _ = await _package(platform, "alice", "private")
        internal, _ = await _package(platform, "bob", "internal", organization=slug)
        run_id = await _start(
            platform,
            [inp("x"), fn("n0", f"{mine}/inc", x="x"), fn("n1", f"{internal}/inc", x="n0.y")],
            1,
        )
        assert _status(await _tick(platform, run_id))["n0"] == "running"
        removed = await platform.client.delete(
            f"/organizations/{slug}/members/alice", headers=headers("bob")
        )
        assert removed.status_code == 204, removed.text

        run = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)

        _assert_refused(run, "n1")
        assert run["node_states"]["n1"]["job_id"] is None

    async def test_an_admin_ticking_does_not_lend_the_owner_its_rights(
        self, node_platform: Platform
    ) -> None:
        platform = node_platform
        mine, _ = await _package(platform, "alice", "private")
        bobs, bobs_id = await _package(platform, "bob", "public")
        run_id = await _start(
            platform,
            [inp("x"), fn("n0", f"{mine}/inc", x="x"), fn("n1", f"{bobs}/inc", x="n0.y")],
            1,
        )
        await _tick(platform, run_id)
        await _set_visibility(platform, "bob", bobs_id, "private")
        run: dict[str, Any] = {}
        for _ in range(60):
            response = await platform.client.post(
                f"/workflow-runs/{run_id}/tick",
                params={"wait": 5},
                headers=platform.headers("admin", ADMIN),
            )
            assert response.status_code == 200, response.text
            run = response.json()
            if run["status"] in TERMINAL:
                break
        _assert_refused(run, "n1")


class TestChainWorkerChecksEachNextNode:
    async def test_a_later_node_gone_private_is_not_run(self, chain_platform: Platform) -> None:
        platform = chain_platform
        mine, _ = await _package(platform, "alice", "private")
        bobs, bobs_id = await _package(platform, "bob", "public")
        # One chain: n0 (alice's, 2 s) then n1 and n2 (bob's), run by one worker.
        nodes = [
            inp("x"),
            fn("n0", f"{mine}/slow", x="x"),
            fn("n1", f"{bobs}/inc", x="n0.y"),
            fn("n2", f"{bobs}/inc", x="n1.y"),
        ]
        run_id = await _start(platform, nodes, 2)
        first = await _tick(platform, run_id)
        assert first["plan_snapshot"]["chains"] == [
            {"id": "chain-0", "node_keys": ["n0", "n1", "n2"]}
        ]
        assert first["node_states"]["n0"]["status"] == "running"
        # Once the worker holds the chain (its claim checked what lay ahead then, allowed),
        # and while n0 sleeps: the refusal must be seen between batches.
        await _claimed(platform, first["node_states"]["n0"]["job_id"])
        await _set_visibility(platform, "bob", bobs_id, "private")

        run = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)

        _assert_refused(run, "n1")
        assert run["node_states"]["n0"]["status"] == "success"
        assert run["node_states"]["n2"]["status"] == "cancelled"
        # n1's job was recorded refused, never run: no outputs, no logs.
        job_id = run["node_states"]["n1"]["job_id"]
        admin = await platform.client.get(
            f"/jobs/{job_id}", headers=platform.headers("admin", ADMIN)
        )
        assert admin.status_code == 200, admin.text
        job = admin.json()
        assert job["status"] == "failed"
        assert job["error"]["kind"] == "permission_denied"
        assert job["outputs"] is None
        assert not job["logs"]

    async def test_a_chain_claimed_after_the_refusal_runs_none_of_the_rest(
        self, chain_platform: Platform
    ) -> None:
        platform = chain_platform
        bobs, bobs_id = await _package(platform, "bob", "public")
        # One chain of one function version: the worker would run it on one held sandbox.
        nodes = [inp("x"), *(fn(f"n{i}", f"{bobs}/inc", x=f"n{i - 1}.y") for i in range(1, 4))]
        nodes[1] = fn("n1", f"{bobs}/inc", x="x")
        worker = platform.execution.worker
        assert worker is not None
        run_id = await _start(platform, nodes, 1)
        await asyncio.to_thread(worker.pause)
        try:
            first = await _tick(platform, run_id)  # n1's chain job, allowed now, waits
            assert first["node_states"]["n1"]["status"] == "running"
            await _set_visibility(platform, "bob", bobs_id, "private")
        finally:
            await asyncio.to_thread(worker.resume)

        run = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)

        # The head was allowed when the tick submitted it, and is checked again by the worker
        # that claims its queued job (issue 27, contract section 8b): refused, never run, and
        # nothing after it ran either.
        assert run["status"] == "failed", run
        assert run["first_failed_node_key"] == "n1", run
        assert run["terminal_outputs"] is None, run
        head = run["node_states"]["n1"]
        assert head["error"]["kind"] == "permission_denied", head
        assert head["outputs"] is None, head
        for key in ("n2", "n3"):
            assert run["node_states"][key]["status"] == "cancelled"
            assert run["node_states"][key]["job_id"] is None


RUN_JOBS = """
query Run($id: ID!) {
  workflowRun(id: $id) {
    status
    nodeStates {
      nodeKey jobId
      job { id inputs outputs logs cacheHit package { id } }
      functionVersion { id }
    }
  }
}
"""


class TestNestedGraphQLFieldsApplyTheTopLevelRules:
    async def test_a_nodes_job_is_null_when_get_job_refuses_it(
        self, node_platform: Platform
    ) -> None:
        platform = node_platform
        mine, _ = await _package(platform, "alice", "private")
        bobs, bobs_id = await _package(platform, "bob", "public")
        run_id = await _start(
            platform,
            [inp("x"), fn("n0", f"{mine}/inc", x="x"), fn("n1", f"{bobs}/inc", x="n0.y")],
            1,
        )
        done = await _until(platform, run_id, lambda r: r["status"] in TERMINAL)
        assert done["status"] == "completed", done
        hidden_job = done["node_states"]["n1"]["job_id"]
        before = await _gql(platform, RUN_JOBS, id=run_id)
        assert "errors" not in before, before
        by_key = {n["nodeKey"]: n for n in before["data"]["workflowRun"]["nodeStates"]}
        assert by_key["n1"]["job"]["outputs"] == {"y": 3.0}

        await _set_visibility(platform, "bob", bobs_id, "private")

        refused = await platform.client.get(f"/jobs/{hidden_job}", headers=platform.headers())
        assert refused.status_code == 403, refused.text
        top = await _gql(platform, "query($id: ID!) { job(id: $id) { id } }", id=hidden_job)
        assert top["errors"][0]["extensions"]["code"] == "PermissionDenied"
        after = await _gql(platform, RUN_JOBS, id=run_id)
        assert "errors" not in after, after
        nodes = {n["nodeKey"]: n for n in after["data"]["workflowRun"]["nodeStates"]}
        assert nodes["n1"]["jobId"] == hidden_job  # the run's own state
        assert nodes["n1"]["job"] is None  # inputs, outputs and logs: not through here either
        assert nodes["n1"]["functionVersion"] is None
        # What stays visible stays there, and an admin reads everything, as at the top level.
        assert nodes["n0"]["job"]["outputs"] == {"y": 2.0}
        assert nodes["n0"]["functionVersion"] is not None
        admin = await _gql(platform, RUN_JOBS, user="admin", id=run_id)
        assert "errors" not in admin, admin
        seen = {n["nodeKey"]: n for n in admin["data"]["workflowRun"]["nodeStates"]}
        assert seen["n1"]["job"]["id"] == hidden_job


class TestTheResultCacheIsPerUser:
    async def test_another_users_identical_call_is_not_a_hit(
        self, every_sandbox_platform: Platform
    ) -> None:
        platform = every_sandbox_platform
        bobs, _ = await _package(platform, "carol", "public")
        path = f"/packages/{bobs}/functions/inc/execute"

        async def call(user: str) -> dict[str, Any]:
            response = await platform.execute(
                path, {"x": 41}, wait=20, headers=platform.headers(user)
            )
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            assert body["status"] == "success", body
            job = await platform.client.get(
                f"/jobs/{body['job_id']}", headers=platform.headers(user)
            )
            assert job.status_code == 200, job.text
            found: dict[str, Any] = job.json()
            return found

        first = await call("alice")
        assert first["cache_hit"] is False
        again = await call("alice")
        assert again["cache_hit"] is True  # the same user's identical call still hits
        assert again["outputs"] == first["outputs"] == {"y": 42.0}
        bob = await call("bob")
        assert bob["cache_hit"] is False  # never answered from alice's result
        bob_again = await call("bob")
        assert bob_again["cache_hit"] is True

    async def test_workflow_nodes_are_cached_per_run_owner(self, node_platform: Platform) -> None:
        platform = node_platform
        shared, _ = await _package(platform, "carol", "public")
        nodes = [inp("x"), fn("n0", f"{shared}/inc", x="x")]
        slug = f"wf-{uuid.uuid4().hex[:8]}"
        body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}, "visibility": "public"}
        created = await platform.client.post("/workflows", json=body, headers=platform.headers())
        assert created.status_code == 201, created.text

        async def run_as(user: str) -> dict[str, Any]:
            started = await platform.client.post(
                f"/workflows/{slug}/runs", json={"inputs": {"x": 7}}, headers=platform.headers(user)
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["id"]
            for _ in range(60):
                response = await platform.client.post(
                    f"/workflow-runs/{run_id}/tick",
                    params={"wait": 5},
                    headers=platform.headers(user),
                )
                run: dict[str, Any] = response.json()
                if run["status"] in TERMINAL:
                    break
            assert run["status"] == "completed", run
            job = await platform.client.get(
                f"/jobs/{run['node_states']['n0']['job_id']}", headers=platform.headers(user)
            )
            found: dict[str, Any] = job.json()
            return found

        assert (await run_as("alice"))["cache_hit"] is False
        assert (await run_as("alice"))["cache_hit"] is True
        assert (await run_as("bob"))["cache_hit"] is False


SUBSCRIBE_JOBS = """
subscription Updates($id: ID!) {
  runUpdates(id: $id, interval: 0.2) {
    status nodeStates { nodeKey status job { id status outputs } }
  }
}
"""


class TestSubscriptionsReadNestedFieldsAtEveryPush:
    async def test_each_push_reads_the_jobs_as_they_are_then(self, node_platform: Platform) -> None:
        platform = node_platform
        mine, _ = await _package(platform, "alice", "private")
        nodes = [inp("x"), fn("n0", f"{mine}/slow", x="x"), fn("n1", f"{mine}/inc", x="n0.y")]
        run_id = await _start(platform, nodes, 0.5)
        response = await platform.client.post(
            "/graphql",
            json={"query": SUBSCRIBE_JOBS, "variables": {"id": run_id}},
            headers={
                **platform.headers(),
                "Accept": "multipart/mixed;subscriptionSpec=1.0, application/json",
            },
            timeout=60,
        )
        assert response.status_code == 200, response.text
        parts = [json.loads(line) for line in response.text.splitlines() if line.startswith("{")]
        pushes = [p["payload"]["data"]["runUpdates"] for p in parts if p.get("payload")]
        assert pushes[-1]["status"] == "completed", pushes
        # A push shows each node's job as it is at that push, not as an earlier push read it
        # (and so, under the access rule as it is then).
        for push in pushes:
            for node in push["nodeStates"]:
                if node["status"] == "success":
                    assert node["job"]["status"] == "success", pushes


class TestRefusedExecutions:
    """The access service's answer for acts done on a user's behalf: `policy.can_execute`
    against current rows, in one statement."""

    async def test_the_rule_of_execute_at_request_time_in_one_statement(
        self, database: Database, identity_provider: LocalIdentityProvider
    ) -> None:
        alice = await create_user(database, identity_provider, "alice")
        bob = await create_user(database, identity_provider, "bob")
        root = await create_user(database, identity_provider, "root", ADMIN)
        org = await create_organization(database, f"o-{uuid.uuid4().hex[:6]}", {bob: "owner"})
        other = await create_organization(database, f"p-{uuid.uuid4().hex[:6]}", {bob: "owner"})
        await create_organization(database, f"q-{uuid.uuid4().hex[:6]}", {alice: "member"})
        rows = {
            "alices-private": await create_package(database, alice, _name(), "private"),
            "bobs-private": await create_package(database, bob, _name(), "private"),
            "bobs-public": await create_package(database, bob, _name(), "public"),
            "internal-member": await create_package(database, bob, _name(), "internal", org),
            "internal-other": await create_package(database, bob, _name(), "internal", other),
        }
        versions = {key: row.function_version_id for key, row in rows.items()}
        async with database.write_session() as session:
            session.add(Membership(organization_id=org.id, user_id=alice.user_id, role="member"))

        async def refused(user_id: str, ids: set[str]) -> tuple[frozenset[str], int]:
            statements: list[str] = []

            def count(*args: Any) -> None:
                statements.append(str(args[2]))

            engine = database.engine.sync_engine
            event.listen(engine, "before_cursor_execute", count)
            try:
                async with database.read_session() as session:
                    found = await access_service.refused_executions(session, user_id, ids)
            finally:
                event.remove(engine, "before_cursor_execute", count)
            return found, len([s for s in statements if s.lstrip().upper().startswith("SELECT")])

        wanted = {*versions.values(), "no-such-version"}
        found, selects = await refused(alice.user_id, wanted)
        assert selects == 1
        assert found == {versions["bobs-private"], versions["internal-other"], "no-such-version"}
        # Each check is now: alice leaves the organization, bob's public package goes private.
        async with database.write_session() as session:
            await session.execute(
                delete(Membership).where(
                    Membership.organization_id == org.id, Membership.user_id == alice.user_id
                )
            )
        await set_visibility(database, rows["bobs-public"].package_id, "private")
        found, _ = await refused(alice.user_id, wanted)
        assert found == wanted - {versions["alices-private"]}
        # Admins execute everything; a user who is gone executes nothing; nothing asked, no SQL.
        assert (await refused(root.user_id, wanted))[0] == {"no-such-version"}
        assert (await refused("no-such-user", wanted))[0] == wanted
        assert await refused(alice.user_id, set()) == (frozenset(), 0)
        # The same rule as the policy's request-time decision, cell by cell.
        facts = policy.PackageFacts("u1", "o1", "internal")
        who = Principal("u2", "s", "u2", frozenset({"user"}))
        for member in (True, False):
            assert policy.can_execute(who, facts, member) is policy.can_see_package(
                who, facts, member
            )


def _name() -> str:
    return f"pkg-{uuid.uuid4().hex[:8]}"
