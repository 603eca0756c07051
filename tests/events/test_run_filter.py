"""The pull's `run` filter (a run page's long-poll and subscription): only that run's own
events and its jobs', each still by its subject's rule; another user's run and a run that
does not exist get the same 404 (nothing learnt); a malformed id is refused with 422, never
ignored. The wake-up names the runs: a reader of one run sleeps through other runs' events."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.events.catalog import parse_types
from calcgraph.domain.events.service import event_row, record_rows
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.notify import LocalNotifier, events_payload, parse_events_payload
from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.door.test_websocket import alice_run, bearer, receive, session
from tests.events.helpers import events
from tests.events.redis_shape import events_since, redis_worker, waiting_poll
from tests.events.test_graphql import _next_event
from tests.events.test_runs import _run
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body
from tests.runs.test_tick_api import CODE, FUNCTIONS
from tests.workflows.graphs import fn, inp

JOBS = parse_types(["calcgraph.job.*"]).matches


def _run_of(event: dict[str, Any]) -> str | None:
    if event["type"].startswith("calcgraph.run."):
        return str(event["subject"])
    run_id = event["data"].get("run_id")
    return None if run_id is None else str(run_id)


async def _pending_run(platform: Platform, user: str = "alice") -> str:
    """A two-node run, created and not ticked."""
    headers = platform.headers(user)
    pkg = f"rf-{uuid.uuid4().hex[:8]}"
    await publish(
        platform.client, headers, small_body(pkg, "1.0.0", code=CODE, functions=FUNCTIONS)
    )
    slug = f"rf-{uuid.uuid4().hex[:8]}"
    graph = {"nodes": [inp("x"), fn("A", f"{pkg}/inc", x="x"), fn("B", f"{pkg}/inc", x="A.y")]}
    created = await platform.client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
    )
    assert created.status_code == 201, created.text
    run = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=headers
    )
    assert run.status_code == 201, run.text
    return str(run.json()["id"])


@pytest.mark.db
async def test_only_the_runs_own_events_and_its_jobs(platform: Platform) -> None:
    await platform.user("alice")
    start = (await events(platform, after="now"))["next_cursor"]
    first = await _run(platform, "inc")
    other = await _run(platform, "inc")
    body = await events(platform, after=start, run=first)
    types = [e["type"] for e in body["items"]]
    assert types[0] == "calcgraph.run.created"
    assert types[-1] == "calcgraph.run.completed"
    assert types.count("calcgraph.calculation.started") == 2
    assert types.count("calcgraph.job.succeeded") == 2
    assert len(types) == 6
    assert {_run_of(e) for e in body["items"]} == {first}
    # The same events as the unfiltered log holds of that run, in the same order.
    every = await events(platform, after=start, limit=500)
    assert [e["id"] for e in every["items"] if _run_of(e) == first] == [
        e["id"] for e in body["items"]
    ]
    assert any(_run_of(e) == other for e in every["items"])
    # With the other filters: types, subject, cursor and limit.
    jobs = await events(platform, after=start, run=first, type="calcgraph.job.*")
    assert [e["type"] for e in jobs["items"]] == ["calcgraph.job.succeeded"] * 2
    page = await events(platform, after=start, run=first, limit=2)
    rest = await events(platform, after=page["next_cursor"], run=first)
    assert [e["id"] for e in page["items"] + rest["items"]] == [e["id"] for e in body["items"]]
    assert (await events(platform, after=start, run=first, subject=other))["items"] == []
    assert [e["type"] for e in (await events(platform, run=first, subject=first))["items"]] == [
        "calcgraph.run.created",
        "calcgraph.run.completed",
    ]


@pytest.mark.db
async def test_a_waiting_poll_answers_its_runs_job(platform: Platform) -> None:
    await platform.user("alice")
    run_id = await _pending_run(platform)
    headers = platform.headers("alice")
    poll = asyncio.create_task(
        platform.client.get(
            "/events",
            params={"after": "now", "wait": 20, "run": run_id, "type": "calcgraph.job.*"},
            headers=headers,
        )
    )
    await asyncio.sleep(0.5)
    assert not poll.done()
    # Another run's jobs end first: they are not this poll's.
    await _run(platform, "inc")
    for _ in range(60):
        ticked = await platform.client.post(
            f"/workflow-runs/{run_id}/tick", params={"wait": 5}, headers=headers
        )
        if poll.done() or ticked.json()["status"] in ("completed", "failed"):
            break
    answer = await poll
    assert answer.status_code == 200, answer.text
    items = answer.json()["items"]
    assert items
    assert {(e["type"], e["data"]["run_id"]) for e in items} == {
        ("calcgraph.job.succeeded", run_id)
    }


@pytest.mark.db
async def test_another_users_run_and_an_unknown_run_answer_alike(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    admin = platform.headers("root", roles=("admin", "user"))
    await platform.user("root")
    start = (await events(platform, after="now"))["next_cursor"]
    run_id = await _run(platform, "inc")
    unknown = str(uuid.uuid4())
    answers = {}
    for name, value in (("alice's", run_id), ("unknown", unknown)):
        for wait in (0, 1):
            response = await platform.client.get(
                "/events",
                params={"run": value, "after": start, "wait": wait},
                headers=platform.headers("bob"),
            )
            assert response.status_code == 404, response.text
            answers[name] = response.json()["detail"].replace(value, "<id>")
    assert answers["alice's"] == answers["unknown"]
    assert answers["unknown"].startswith("NotFound: ")
    # An admin sees every run's.
    response = await platform.client.get(
        "/events", params={"run": run_id, "after": start}, headers=admin
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["items"]) == 6


@pytest.mark.db
@pytest.mark.parametrize(
    "value",
    [
        "",
        "run-1",
        "x" * 37,
        "00000000-0000-4000-8000-00000000000\x00",
        "\x00",
        "' OR 1=1 --",
        "%",
        str(uuid.uuid4()) + " ",
    ],
    ids=["empty", "not-a-uuid", "too-long", "nul-inside", "nul", "sql", "wildcard", "space"],
)
async def test_a_malformed_run_is_refused(platform: Platform, value: str) -> None:
    await platform.user("alice")
    response = await platform.client.get(
        "/events", params={"run": value, "wait": 1}, headers=platform.headers("alice")
    )
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["detail"].startswith("ValidationError: ")
    assert ["query", "run"] in [e["loc"] for e in body["errors"]]


GRAPHQL = """
query($run: ID, $after: String) {
  events(run: $run, after: $after, wait: 0) { items { id type subject data } nextCursor }
}
"""


@pytest.mark.db
async def test_graphql_query_filters_by_run(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    start = (await events(platform, after="now"))["next_cursor"]
    run_id = await _run(platform, "inc")
    await _run(platform, "inc")

    async def ask(user: str, run: str) -> dict[str, Any]:
        answer = await platform.client.post(
            "/graphql",
            json={"query": GRAPHQL, "variables": {"run": run, "after": start}},
            headers=platform.headers(user),
        )
        body: dict[str, Any] = answer.json()
        return body

    mine = await ask("alice", run_id)
    items = mine["data"]["events"]["items"]
    assert len(items) == 6
    assert {_run_of(e) for e in items} == {run_id}
    codes = []
    for user, run in (("bob", run_id), ("bob", str(uuid.uuid4())), ("alice", "nope")):
        errors = (await ask(user, run))["errors"]
        codes.append(errors[0]["extensions"]["code"])
    assert codes == ["NotFound", "NotFound", "ValidationError"]
    # A NUL is refused before any resolver runs, as in every variable.
    answer = await platform.client.post(
        "/graphql",
        json={"query": GRAPHQL, "variables": {"run": "nope\x00"}},
        headers=platform.headers("alice"),
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith("ValidationError: ")


async def test_a_readers_wake_up_names_its_run() -> None:
    notifier = LocalNotifier()
    async with (
        notifier.listen_events(JOBS, "r1") as one,
        notifier.listen_events(JOBS, "r2") as two,
        notifier.listen_events(JOBS) as every,
    ):
        notifier.publish_events({"calcgraph.job.succeeded"}, {"r2"})
        await asyncio.wait_for(two.wait(), 5)
        await asyncio.wait_for(every.wait(), 5)
        await asyncio.sleep(0)
        assert not one.is_set()
        two.clear()
        # An event outside any run wakes no run's reader.
        notifier.publish_events({"calcgraph.job.failed"}, set())
        await asyncio.sleep(0.05)
        assert not one.is_set()
        assert not two.is_set()
        # Runs unknown (an older process's signal): every reader of the type wakes.
        notifier.publish_events({"calcgraph.job.failed"}, None)
        await asyncio.wait_for(one.wait(), 5)
        await asyncio.wait_for(two.wait(), 5)


def test_the_redis_message_carries_the_runs_and_reads_old_ones() -> None:
    payload = events_payload({"calcgraph.job.succeeded", "calcgraph.run.completed"}, {"r1", "r2"})
    assert parse_events_payload(payload) == (
        ["calcgraph.job.succeeded", "calcgraph.run.completed"],
        {"r1", "r2"},
    )
    # An older reader keeps the `calcgraph.` items: the types, whatever the runs.
    assert [t for t in payload.split(",") if t.startswith("calcgraph.")] == [
        "calcgraph.job.succeeded",
        "calcgraph.run.completed",
    ]
    assert parse_events_payload(events_payload({"calcgraph.user.login"}, set())) == (
        ["calcgraph.user.login"],
        set(),
    )
    # An older publisher's message: runs unknown; an unknown signal: everything unknown.
    assert parse_events_payload("calcgraph.job.succeeded") == (["calcgraph.job.succeeded"], None)
    assert parse_events_payload("") == (None, None)
    many = {str(uuid.uuid4()) for _ in range(101)}
    assert parse_events_payload(events_payload({"calcgraph.job.failed"}, many))[1] is None


@pytest.mark.db
async def test_a_unit_signals_the_runs_of_its_events(database: Database) -> None:
    notifier = LocalNotifier()
    hooks = list(database.unit_hooks)
    attach_signal(database, notifier)
    try:
        async with (
            notifier.listen_events(JOBS, "run-a") as a,
            notifier.listen_events(JOBS, "run-b") as b,
        ):
            job = str(uuid.uuid4())
            row = event_row(
                "calcgraph.job.succeeded",
                job,
                {"job_id": job, "status": "success", "error": None, "run_id": "run-b"},
            )
            assert row["run_id"] == "run-b"
            async with database.write_session() as session:
                await record_rows(session, [row])
            await asyncio.wait_for(b.wait(), 5)
            await asyncio.sleep(0.05)
            assert not a.is_set()
    finally:
        database.unit_hooks[:] = hooks


def test_the_run_an_event_belongs_to() -> None:
    assert event_row("calcgraph.run.created", "r9", {"run_id": "r9"})["run_id"] == "r9"
    started = {"job_id": "j", "function": "f", "function_version_id": "v", "run_id": None}
    assert event_row("calcgraph.calculation.started", "j", started)["run_id"] is None
    assert event_row("calcgraph.user.login", "u", {"username": "alice"})["run_id"] is None
    # A package event whose data happens to name a run still belongs to none.
    promoted = {"package": "p", "version": "1", "previous": None, "run_id": "r9"}
    assert event_row("calcgraph.deployment.promoted", "p", promoted)["run_id"] is None


@pytest.fixture
async def worker_process(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    async with redis_worker(exec_url, identity_provider, tmp_path) as platform:
        yield platform


@pytest.mark.db
async def test_a_run_poll_is_woken_across_processes(worker_process: Platform) -> None:
    """Production shape: the job runs, ends and is recorded in the `calcgraph worker`
    process; its wake-up crosses Redis naming the run, and wakes the poll of that run waiting
    in the API process (its fallback re-check is off: only the signal can wake it)."""
    platform = worker_process
    await platform.user("alice")
    headers = platform.headers("alice")
    run_id = await _pending_run(platform)
    other = await _pending_run(platform)
    poll = await waiting_poll(platform, headers, run=run_id, type="calcgraph.job.succeeded")
    ticked = await platform.client.post(
        f"/workflow-runs/{run_id}/tick", params={"wait": 0}, headers=headers
    )
    assert ticked.status_code == 200, ticked.text
    woke = await poll.answer(time.monotonic())
    # A's end wakes it; on a loaded machine B (run on by the same worker) may have ended too
    # by the time the poll reads: its events, of this run only, in order.
    found = [(e["type"], e["data"]["run_id"], e["data"]["node_key"]) for e in woke]
    assert found[:1] == [("calcgraph.job.succeeded", run_id, "A")], found
    assert {(t, r) for t, r, _ in found} == {("calcgraph.job.succeeded", run_id)}, found
    # The other run's page: nothing of the first run reaches it.
    quiet = await events_since(platform, headers, None, run=other)
    assert [e["type"] for e in quiet] == ["calcgraph.run.created"]


SUBSCRIBE_RUN = """
subscription($run: ID!) { events(run: $run, types: ["calcgraph.job.*"]) { type subject data } }
"""


@pytest.fixture(scope="module")
def served(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with serve(exec_url, identity_provider, tmp_path_factory.mktemp("served")) as running:
        yield running


async def _tick_to_end(served: Served, run_id: str) -> None:
    async with httpx.AsyncClient(
        base_url=served.url, headers=bearer(served, "alice"), timeout=60
    ) as client:
        for _ in range(60):
            ticked = await client.post(f"/workflow-runs/{run_id}/tick", params={"wait": 5})
            assert ticked.status_code == 200, ticked.text
            if ticked.json()["status"] in ("completed", "failed"):
                return


@pytest.mark.db
async def test_the_subscription_of_a_run_pushes_its_jobs_only(served: Served) -> None:
    run_id = await alice_run(served)
    async with session(served, bearer(served, "alice")) as ws:
        assert (await receive(ws))["type"] == "connection_ack"
        payload = {"query": SUBSCRIBE_RUN, "variables": {"run": run_id}}
        await ws.send(json.dumps({"id": "run", "type": "subscribe", "payload": payload}))
        await asyncio.sleep(0.5)  # subscribed before anything runs
        await _tick_to_end(served, await alice_run(served))  # another run's jobs first
        await _tick_to_end(served, run_id)
        pushed = [await _next_event(ws) for _ in range(2)]
    assert [(e["type"], e["data"]["run_id"], e["data"]["node_key"]) for e in pushed] == [
        ("calcgraph.job.succeeded", run_id, "A"),
        ("calcgraph.job.succeeded", run_id, "B"),
    ]


@pytest.mark.db
async def test_the_subscription_of_another_users_run_is_refused(served: Served) -> None:
    run_id = await alice_run(served)
    answers = []
    for value in (run_id, str(uuid.uuid4())):
        async with session(served, bearer(served, "bob")) as ws:
            assert (await receive(ws))["type"] == "connection_ack"
            payload = {"query": SUBSCRIBE_RUN, "variables": {"run": value}}
            await ws.send(json.dumps({"id": "run", "type": "subscribe", "payload": payload}))
            message = await receive(ws)
            assert message["type"] in ("error", "next"), message
            errors = (
                message["payload"] if message["type"] == "error" else message["payload"]["errors"]
            )
            answers.append(
                (errors[0]["extensions"]["code"], errors[0]["message"].replace(value, "<id>"))
            )
    assert answers[0] == answers[1]
    assert answers[0][0] == "NotFound"
