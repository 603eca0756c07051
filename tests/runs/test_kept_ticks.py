"""A tick that finds nothing new is answered without the database (issue 24): what a tick that
changed nothing answered is kept under the run's change token, and every unit of work that
changes the run renews the token after its commit (`calcgraph.domain.runs.changes`).

What must never happen: a stale answer (a job finished, a cancel, another process's tick, not
seen by the next tick) or an answer to a caller the database would refuse. Checked on both
databases, in one process (the embedded default) and through Redis with a `calcgraph worker`
process running the jobs.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from calcgraph.domain.runs import changes
from calcgraph.domain.runs.memo import ANSWER_MAX_AGE_S, KeptAnswer, RunMemo
from calcgraph.domain.runs.service import run_service
from calcgraph.domain.runs.views import RunView
from calcgraph.rest_compat import routes_workflows
from calcgraph.workers.run_changes import LocalRunChanges, RedisRunChanges
from tests.execution.conftest import Platform
from tests.execution.test_redis import REDIS_URL, _redis_or_skip, redis_platform  # noqa: F401
from tests.packages.publishing import Bearer, publish, small_body
from tests.runs.test_run_control_api import _job
from tests.runs.test_tick_api import TERMINAL, _package, _start, _tick, _workflow
from tests.runs.test_tick_statements_api import _Counter, _run, counted  # noqa: F401
from tests.workflows.graphs import fn, inp

# --- the tokens and the kept answers, alone ---


async def test_a_mark_renews_only_its_run_and_everything_renews_all() -> None:
    store = LocalRunChanges()
    assert await store.token("a") is None  # never marked: no token, nothing kept
    await store.issue("a")
    await store.mark({"b"})
    a, b = await store.token("a"), await store.token("b")
    assert a is not None
    assert b is not None
    await store.issue("a")  # a token is kept by issue
    assert await store.token("a") == a
    await store.mark({"a"})
    assert await store.token("a") != a
    assert await store.token("b") == b
    await store.mark({changes.EVERYTHING})
    assert await store.token("b") != b


async def test_a_forgotten_run_never_meets_an_old_token_again() -> None:
    store = LocalRunChanges(size=2)
    await store.mark({"a"})
    old = await store.token("a")
    await store.mark({"b"})
    await store.mark({"c"})  # "a" is forgotten
    assert await store.token("a") is None
    await store.issue("a")
    assert await store.token("a") != old
    assert await store.token("c") is not None


def test_marks_are_collected_per_unit_of_work_only() -> None:
    changes.changed("lost")  # no unit of work: nowhere to go
    with changes.collecting() as marks:
        changes.changed("a", None)
        changes.everything()
        with changes.collecting() as inner:
            changes.changed("b")
        assert inner == {"b"}
    assert marks == {"a", changes.EVERYTHING}


def test_a_kept_answer_is_dropped_when_its_token_changes_or_it_ages() -> None:
    memo = RunMemo()
    view = RunView(
        id="r",
        workflow_id="w",
        workflow_version_id="v",
        user_id="u",
        status="running",
        inputs={},
        terminal_outputs=None,
        error_message=None,
        first_failed_node_key=None,
        plan_snapshot={},
        revision=1,
        started_at=None,  # type: ignore[arg-type]
        completed_at=None,
    )
    kept = KeptAnswer(("1", "0"), "u", "u", None, "private", None, 100.0)
    memo.keep_answer("r", kept, None, view)
    assert memo.answers.get("r") is kept
    assert kept.current(("1", "0"), 101.0)
    assert not kept.current(("2", "0"), 101.0)
    assert not kept.current(("1", "1"), 101.0)
    assert not kept.current(("1", "0"), 100.0 + ANSWER_MAX_AGE_S + 1)


async def test_through_redis_a_mark_is_known_here_without_a_read() -> None:
    """The token a mark set is the one a read finds (a tick that changed its run notes it
    without a second round trip); one this process did not set is not known here."""
    _redis_or_skip()
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    store = RedisRunChanges(REDIS_URL, prefix)
    try:
        await store.mark({"a"})  # no epoch yet (a fresh Redis): its token is not known
        assert store.marked("a") is None
        assert await store.token("a") is None  # nor read: the read gives the epoch
        await store.mark({"a", "b"})
        a = await store.token("a")
        assert a is not None
        assert store.marked("a") == a
        assert store.marked("b") == await store.token("b")
        await store.mark({"a", changes.EVERYTHING})  # a fresh epoch: read back with the mark
        assert store.marked("a") == await store.token("a")
        assert store.marked("a") != a
        elsewhere = RedisRunChanges(REDIS_URL, prefix)
        await elsewhere.mark({"b"})  # another process: this one still knows its own mark only
        assert store.marked("b") != await store.token("b")
        await elsewhere.close()
    finally:
        await store.close()


# --- through the API, one process, both databases ---

db = pytest.mark.db


def _no_runs_read(statements: list[str]) -> bool:
    return not any("WORKFLOW_RUNS" in s or "NODE_STATES" in s for s in statements)


@db
async def test_an_unchanged_tick_reads_nothing_and_answers_what_the_database_does(
    client: httpx.AsyncClient,
    bearer: Bearer,
    counted: _Counter,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    run_id = await _run(client, bearer, 3)  # no workers here: its jobs stay queued
    path = f"/workflow-runs/{run_id}/tick"
    submit = await client.post(path, headers=bearer("alice"))
    revision = submit.json()["revision"]
    for params in ({}, {"since": revision}, {"since": 0}):
        counted.statements.clear()
        first = await client.post(path, params=params, headers=bearer("alice"))
        assert first.status_code == 200, first.text
        assert counted.statements, "the first tick after a change reads the database"
        for _ in range(3):
            counted.statements.clear()
            again = await client.post(path, params=params, headers=bearer("alice"))
            assert again.status_code == 200
            assert counted.statements == [], counted.statements
            assert again.json() == first.json()
        # What a process that keeps nothing reads from the database: the same answer.
        monkeypatch.setattr(run_service, "memo", RunMemo())
        fresh = await client.post(path, params=params, headers=bearer("alice"))
        assert fresh.json() == first.json()
        assert counted.statements
    assert (await client.post(path, params={"since": 0}, headers=bearer("alice"))).json()[
        "node_states"
    ] == submit.json()["node_states"]


@db
async def test_a_kept_answer_is_written_once(
    client: httpx.AsyncClient,
    bearer: Bearer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ticks answered from a kept answer answer the bytes written for it the first time:
    the view is not validated and written again at every tick."""
    written: list[bytes] = []
    serialise = routes_workflows._RUN_JSON

    def counting(value: object) -> bytes:
        written.append(serialise(value))
        return written[-1]

    monkeypatch.setattr(routes_workflows, "_RUN_JSON", counting)
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    run_id = await _run(client, bearer, 2)
    path = f"/workflow-runs/{run_id}/tick"
    await client.post(path, headers=bearer("alice"))  # submits: changes the run
    for params in ({}, {"since": 1}):
        written.clear()
        first = await client.post(path, params=params, headers=bearer("alice"))  # kept
        answers = [await client.post(path, params=params, headers=bearer("alice"))]
        answers.append(await client.post(path, params=params, headers=bearer("mallory")))
        assert [a.status_code for a in answers] == [200, 403]
        assert answers[0].content == first.content
        assert answers[0].headers["content-type"] == "application/json"
        assert len(written) == 1, "kept answers are written once"
    vendor = await client.post(
        path, headers={**bearer("alice"), "Accept": "application/vnd.service.v1+json"}
    )
    assert vendor.headers["content-type"] == "application/vnd.service.v1+json"
    assert vendor.json() == (await client.post(path, headers=bearer("alice"))).json()


@db
async def test_a_kept_answer_is_never_given_to_another_user(
    client: httpx.AsyncClient,
    bearer: Bearer,
    counted: _Counter,  # noqa: F811
) -> None:
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    run_id = await _run(client, bearer, 2)
    path = f"/workflow-runs/{run_id}/tick"
    await client.post(path, headers=bearer("alice"))
    await client.post(path, headers=bearer("alice"))  # kept now
    counted.statements.clear()
    assert (await client.post(path, headers=bearer("alice"))).status_code == 200
    assert counted.statements == []
    for params in ({}, {"since": 1}):
        refused = await client.post(path, params=params, headers=bearer("mallory"))
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"].startswith("PermissionDenied")
    anonymous = await client.post(path)
    assert anonymous.status_code == 401
    # An administrator may see every run: answered, and the same answer.
    admin = await client.post(path, headers=bearer("root", roles=["admin", "user"]))
    assert admin.status_code == 200
    assert admin.json() == (await client.post(path, headers=bearer("alice"))).json()
    # A `since` beyond the run's revision is refused as before, kept answers or not.
    bad = await client.post(path, params={"since": 99}, headers=bearer("alice"))
    assert bad.status_code == 422, bad.text


@db
async def test_a_cancel_is_seen_by_the_next_tick(
    client: httpx.AsyncClient,
    bearer: Bearer,
    counted: _Counter,  # noqa: F811
) -> None:
    await publish(client, bearer("alice"), small_body("wide", "1.0.0"))
    run_id = await _run(client, bearer, 2)
    path = f"/workflow-runs/{run_id}/tick"
    await client.post(path, headers=bearer("alice"))
    kept = (await client.post(path, headers=bearer("alice"))).json()
    assert kept["status"] == "running"
    cancelled = await client.post(f"/workflow-runs/{run_id}/cancel", headers=bearer("alice"))
    assert cancelled.status_code == 200, cancelled.text
    after = await client.post(path, headers=bearer("alice"))
    assert after.json()["status"] == "cancelled"
    assert {s["status"] for s in after.json()["node_states"].values()} == {"cancelled"}
    assert after.json()["revision"] > kept["revision"]


# --- with workers: a job that finished is always seen by the next tick ---


def _diamond(package: str) -> list[dict[str, Any]]:
    return [
        inp("x"),
        fn("A", f"{package}/inc", x="x"),
        fn("B", f"{package}/inc", x="A.y"),
        fn("C", f"{package}/inc", x="A.y"),
        fn("D", f"{package}/add", a="B.y", b="C.y"),
    ]


async def _finished(platform: Platform, job_id: str) -> None:
    """Until the platform announces the job's end, as it does to a long-polling tick: after
    the worker's unit of work is over (its commit, then the run's fresh token)."""
    async with platform.execution.notifier.listen(job_id) as ended:
        await asyncio.wait_for(ended.wait(), 60)
    assert (await _job(platform, job_id))["status"] in ("success", "failed")


async def _every_finish_seen(platform: Platform, x: float) -> dict[str, Any]:
    """Tick a diamond, plain ticks; whenever a node runs, wait until its job's row says it
    finished, then tick once: that tick must have taken the result in."""
    slug = await _workflow(platform, _diamond(await _package(platform)))
    async with platform.execution.notifier.listen("none"):
        pass  # subscribed (through Redis) before any job of the run can end
    run = await _start(platform, slug, {"x": x})
    seen = 0
    for _ in range(40):
        run = await _tick(platform, run["id"])
        again = await _tick(platform, run["id"])  # most likely kept: the same answer
        assert again["revision"] >= run["revision"]
        run = again
        if run["status"] in TERMINAL:
            break
        running = {
            k: s["job_id"] for k, s in run["node_states"].items() if s["status"] == "running"
        }
        for job_id in running.values():
            await _finished(platform, job_id)
        after = await _tick(platform, run["id"])
        for key in running:
            assert after["node_states"][key]["status"] != "running", (key, after)
            seen += 1
        run = after
    assert run["status"] == "completed", run
    assert seen == 4
    assert run["node_states"]["D"]["outputs"] == {"y": 2 * (x + 2)}
    return run


@db
async def test_in_one_process_every_finished_job_is_seen_by_the_next_tick(
    platform: Platform,
) -> None:
    await _every_finish_seen(platform, 1.0)


@db
async def test_through_redis_every_finished_job_is_seen_by_the_next_tick(
    redis_platform: Platform,  # noqa: F811
) -> None:
    platform = redis_platform
    assert platform.execution.runtime is None  # the worker process runs the jobs
    store = platform.execution.backbone.changes
    assert isinstance(store, RedisRunChanges)
    run = await _every_finish_seen(platform, 2.0)
    # The run's token lives in Redis, where every serve process reads it.
    assert await store.token(run["id"]) is not None


@db
async def test_through_redis_another_process_sees_the_change_this_one_made(
    redis_platform: Platform,  # noqa: F811
) -> None:
    """A second serve process (its own memo and its own Redis client) keeps an answer; a
    tick here that changes the run renews the token in Redis, so that process reads again."""
    platform = redis_platform
    slug = await _workflow(platform, _diamond(await _package(platform)))
    run = await _start(platform, slug, {"x": 3.0})
    service = platform.execution.service
    elsewhere = RedisRunChanges(REDIS_URL, platform.settings.redis_key_prefix)
    here_memo = run_service.memo
    other_memo = RunMemo()
    alice = await platform.user("alice")
    try:
        for _ in range(60):
            if run["status"] in TERMINAL:
                break
            # The other process: its token read, then its (kept) answer.
            run_service.memo = other_memo
            token = await elsewhere.token(run["id"])
            if token is None:
                await elsewhere.issue(run["id"])
                token = await elsewhere.token(run["id"])
            assert token is not None
            async with platform.database.read_session() as session:
                await run_service.answer(session, alice, run["id"], token=token)
            kept = run_service.kept(alice, run["id"], token, None)
            run_service.memo = here_memo
            # This process: a tick long-polled until a job finished, which may change the run.
            before = run["revision"]
            run = await _tick(platform, run["id"], wait=5)
            run_service.memo = other_memo
            now = await elsewhere.token(run["id"])
            answer = None if now is None else run_service.kept(alice, run["id"], now, None)
            run_service.memo = here_memo
            if run["revision"] != before:
                assert now != token
                assert answer is None
            elif kept is not None and answer is not None:
                assert answer.revision == run["revision"]
        assert run["status"] == "completed", run
    finally:
        run_service.memo = here_memo
        await elsewhere.close()
    assert service.changes is not None
