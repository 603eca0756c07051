"""Contract section 9's table, row by row, and where each row is tested (every module named
is parametrized over SQLite and PostgreSQL by the `db` fixtures). "In-process": the embedded
broker and workers; "Redis": the API only sends, a `calcgraph worker` process does the work.

- `calcgraph.file.uploaded`
  - POST /packages: in-process test_pull, test_graphql, test_client_cli.
  - POST /packages/from-git: in-process this module, test_from_git_records_the_upload.
  - POST /functions: in-process test_recorded (with the builds).
  - Redis: not tested apart; the API's door records it in the request's transaction, the same
    code whatever the broker.
- `calcgraph.calculation.started`: in-process test_pull, test_signal; Redis test_redis.
- `calcgraph.user.login`: in-process test_recorded; Redis test_redis_login (the code flow,
  a long-poll woken, a replayed code recording nothing).
- `calcgraph.job.succeeded`, `.failed`: in-process test_pull, test_runs, test_isolation;
  Redis test_redis (recorded in the worker's units of work).
- `calcgraph.run.created`, `.completed`, `.failed`: in-process test_runs, test_graphql,
  test_webhooks. `.cancelled`: tests/runs/test_run_control_api. Redis: this module,
  test_run_events_with_a_worker_process (created, completed, failed); `.cancelled` with the
  worker process running the stopped job: test_redis_doors.
- `calcgraph.build.ready`, `.refused`: in-process test_recorded; Redis test_redis_doors (ready,
  refused at scan, failed to install, and a refusal after the build that records nothing; the
  worker process runs what was built).
- `calcgraph.deployment.promoted`, `.rolled_back`: in-process tests/packages/
  test_deployments_api, test_canary_api, tests/execution/test_canary_workers (sweeper);
  Redis tests/execution/test_canary_workers and this module,
  test_a_worker_sweeper_decides_and_records (both kinds, envelope and access).
- `calcgraph.webhook.disabled`: in-process test_webhooks; Redis this module,
  test_a_worker_disables_a_failing_webhook.

The tests of this module check each event's CloudEvents envelope, its `data` keys from the
contract, and that another user (bob) does not see it. The Redis + worker fixture is
tests/execution/test_redis.py's `redis_platform` (and tests/execution/test_canary_workers.py's
shapes for the sweeper), imported, not copied.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from calcgraph.domain.packages.models import PackageCanary
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.events.helpers import events, published
from tests.events.receiver import receiver
from tests.events.test_runs import _run as run_to_the_end
from tests.execution.conftest import Platform
from tests.execution.test_canary_workers import SHAPES, canary_body, deploy, settled
from tests.execution.test_redis import redis_platform  # noqa: F401
from tests.packages.publishing import Bearer
from tests.packages.test_publish_git import Repo, commit, demo_tree, git

pytestmark = pytest.mark.db


def assert_envelope(event: dict[str, Any], type_: str, subject: str, keys: set[str]) -> None:
    """The CloudEvents 1.0 structured-mode envelope of section 9, and `data`'s keys."""
    assert event["specversion"] == "1.0"
    assert event["id"]
    assert event["source"] == "calcgraph"
    assert event["type"] == type_
    assert event["subject"] == subject
    assert datetime.fromisoformat(event["time"]).tzinfo is not None
    assert event["datacontenttype"] == "application/json"
    assert isinstance(event["data"], dict)
    assert keys <= set(event["data"]), (keys, event["data"])


# --- file.uploaded through POST /packages/from-git -------------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    path = tmp_path_factory.mktemp("events-git")
    git(path, "init", "-q", "-b", "main")
    v120 = commit(path, demo_tree("1.2.0"), "1.2.0")
    git(path, "tag", "v1.2.0")
    return Repo(path, v120, v120, v120, v120)


@pytest.fixture
def settings(settings: Settings, repo: Repo) -> Settings:
    """The operator allows local deploys from the folder holding the test repository."""
    return settings.model_copy(update={"git_local_roots": [repo.path.parent]})


async def test_from_git_records_the_upload(
    client: httpx.AsyncClient, bearer: Bearer, repo: Repo
) -> None:
    alice, bob = bearer("alice"), bearer("bob")
    start = (await client.get("/events", params={"after": "now"}, headers=alice)).json()
    deployed = await client.post(
        "/packages/from-git", json={"git_url": repo.url, "ref": "v1.2.0"}, headers=alice
    )
    assert deployed.status_code == 201, deployed.text
    package_id = deployed.json()["package_id"]
    found = await client.get(
        "/events",
        params={"after": start["next_cursor"], "type": "calcgraph.file.uploaded"},
        headers=alice,
    )
    items = found.json()["items"]
    assert [e["subject"] for e in items] == [package_id]
    event = items[0]
    assert_envelope(
        event,
        "calcgraph.file.uploaded",
        package_id,
        {"package", "version", "files", "uploaded_by"},
    )
    data = event["data"]
    assert (data["package"], data["version"], data["uploaded_by"]) == (
        package_id,
        "1.2.0",
        "alice",
    )
    tree = demo_tree("1.2.0")
    files = {f["path"]: f for f in data["files"]}
    assert set(files) <= set(tree)
    assert "calcgraph.yaml" in files
    for path, entry in files.items():
        content = tree[path].encode()
        assert entry["size"] == len(content)
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()
    # bob may not GET alice's private package (403): he sees none of its events.
    assert (await client.get(f"/packages/{package_id}", headers=bob)).status_code == 403
    for params in ({"subject": package_id}, {"type": "calcgraph.file.*"}):
        seen = (await client.get("/events", params=params, headers=bob)).json()["items"]
        assert not [e for e in seen if e["subject"] == package_id]


# --- Redis + `calcgraph worker`: deployment events decided by a worker's sweeper ----------


@pytest.mark.parametrize(
    ("candidate", "decided"),
    [
        ("def run(x):\n    return {'y': x}\n# 2\n", "promoted"),
        ("def run(x):\n    raise ValueError('broken')\n", "rolled_back"),
    ],
    ids=["promoted", "rolled_back"],
)
async def test_a_worker_sweeper_decides_and_records(
    candidate: str,
    decided: str,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> None:
    """The canary is judged by the `calcgraph worker`'s sweeper (this process judges nothing):
    a healthy candidate is promoted, one whose every job fails is rolled back."""
    factory, _ = SHAPES["redis-1-worker"]
    async with factory(exec_url, identity_provider, tmp_path, 1) as platform:
        assert not platform.execution.in_process
        await platform.user("alice")
        await platform.user("bob")
        name = f"ev2-{uuid.uuid4().hex[:8]}"
        ok = "def run(x):\n    return {'y': x}\n"
        await deploy(platform, canary_body(name, "1.0.0", ok))
        report = await deploy(
            platform,
            canary_body(
                name,
                "2.0.0",
                candidate,
                traffic_split={"1.0.0": 0, "2.0.0": 100},
                # Generous: who judges is tested here, not how fast a cold sandbox starts.
                success_criteria={"error_rate_max": "10%", "latency_p95_max": 300_000},
            ),
        )
        pid = report["package_id"]
        for x in range(3):
            done = await platform.execute(f"/packages/{name}/functions/run/execute", {"x": x}, 60)
            assert done.status_code == 200, done.text
            assert done.json()["status"] == ("success" if decided == "promoted" else "failed")
        async with platform.database.write_session() as session:
            await session.execute(
                update(PackageCanary)
                .where(PackageCanary.package_id == pid)
                .values(ends_at=datetime.now().astimezone())
            )
        answer = await settled(platform, pid)
        current = "2.0.0" if decided == "promoted" else "1.0.0"
        assert (answer["state"], answer["current"]) == ("stable", current), answer["history"]
        body = await events(platform, type="calcgraph.deployment.*", subject=pid)
        kind = f"calcgraph.deployment.{decided}"
        assert [e["type"] for e in body["items"]] == [kind]
        event = body["items"][0]
        assert_envelope(event, kind, pid, {"package", "version", "previous", "reason"})
        expected = ("2.0.0", "1.0.0") if decided == "promoted" else ("1.0.0", "2.0.0")
        assert (event["data"]["version"], event["data"]["previous"]) == expected
        assert event["data"]["reason"]
        hidden = await events(platform, "bob", type="calcgraph.deployment.*", subject=pid)
        assert hidden["items"] == []


# --- Redis + `calcgraph worker`: webhook.disabled recorded by the worker's deliveries ---


@pytest.fixture
def failing_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read by the API's settings and inherited by the worker process.
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_RETRY_SCHEDULE", "")
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_DISPATCH_INTERVAL_SECONDS", "0.1")


async def test_a_worker_disables_a_failing_webhook(
    failing_fast: None,
    redis_platform: Platform,  # noqa: F811
) -> None:
    platform = redis_platform
    assert not platform.execution.in_process
    await platform.user("alice")
    await platform.user("bob")
    report = await published(platform)
    path = f"/packages/{report['package_id']}/functions/run/execute"
    first = await platform.execute(path, {"x": 7.0}, wait=60)
    assert first.status_code == 200, first.text
    with receiver("fail") as failing:
        created = await platform.client.post(
            "/webhooks",
            json={"url": failing.url, "types": ["calcgraph.job.*"]},
            headers=platform.headers(),
        )
        assert created.status_code == 201, created.text
        hook = created.json()
        start = (await events(platform, after="now"))["next_cursor"]
        for _ in range(50):  # answered by the result cache: one job.succeeded each
            again = await platform.execute(path, {"x": 7.0}, wait=20)
            assert again.json()["status"] == "success"
        enabled = True
        for _ in range(1200):
            shown = await platform.client.get(f"/webhooks/{hook['id']}", headers=platform.headers())
            enabled = shown.json()["enabled"]
            if not enabled:
                break
            await asyncio.sleep(0.1)
        assert enabled is False
    body = await events(platform, after=start, type="calcgraph.webhook.disabled")
    items = [e for e in body["items"] if e["subject"] == hook["id"]]
    assert len(items) == 1
    assert_envelope(items[0], "calcgraph.webhook.disabled", hook["id"], {"webhook_id", "url"})
    assert items[0]["data"] == {"webhook_id": hook["id"], "url": hook["url"]}
    hidden = await events(platform, "bob", type="calcgraph.webhook.*")
    assert not [e for e in hidden["items"] if e["subject"] == hook["id"]]
    assert (
        await platform.client.get(f"/webhooks/{hook['id']}", headers=platform.headers("bob"))
    ).status_code == 404


# --- Redis + `calcgraph worker`: run events, the nodes' jobs run by the worker -------------


@pytest.mark.parametrize(("function", "ended"), [("inc", "completed"), ("boom", "failed")])
async def test_run_events_with_a_worker_process(
    function: str,
    ended: str,
    redis_platform: Platform,  # noqa: F811
) -> None:
    platform = redis_platform
    assert not platform.execution.in_process
    await platform.user("alice")
    await platform.user("bob")
    start = (await events(platform, after="now"))["next_cursor"]
    run_id = await run_to_the_end(platform, function)
    body = await events(platform, after=start, subject=run_id, type="calcgraph.run.*")
    assert [e["type"] for e in body["items"]] == [
        "calcgraph.run.created",
        f"calcgraph.run.{ended}",
    ]
    keys = {"run_id", "workflow", "status", "first_failed_node_key"}
    created, last = body["items"]
    assert_envelope(created, "calcgraph.run.created", run_id, keys)
    assert_envelope(last, f"calcgraph.run.{ended}", run_id, keys | {"terminal_outputs"})
    assert (created["data"]["run_id"], created["data"]["status"]) == (run_id, "pending")
    assert last["data"]["status"] == ended
    if ended == "completed":
        assert last["data"]["first_failed_node_key"] is None
        assert last["data"]["terminal_outputs"]
    else:
        assert last["data"]["first_failed_node_key"] == "B"
        assert last["data"]["terminal_outputs"] is None
    jobs = await events(platform, after=start, type="calcgraph.job.*")
    ours = [e for e in jobs["items"] if e["data"]["run_id"] == run_id]
    assert {e["data"]["node_key"] for e in ours} == {"A", "B"}
    for event in ours:
        assert_envelope(
            event,
            event["type"],
            event["subject"],
            {"job_id", "status", "error", "run_id", "node_key"},
        )
    subjects = {run_id, *(e["subject"] for e in ours)}
    hidden = await events(platform, "bob", after=start)
    assert not [e for e in hidden["items"] if e["subject"] in subjects]
