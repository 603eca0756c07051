"""Events with Redis and a `calcgraph worker` process: the job's events are recorded in the
worker's units of work, the API's long-poll wakes through Redis pub/sub, and the worker
process delivers webhooks."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.events.helpers import events, published
from tests.events.receiver import receiver
from tests.execution.conftest import Platform
from tests.execution.test_redis import redis_platform  # noqa: F401

pytestmark = pytest.mark.db


@pytest.fixture
def allow_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read by the API's settings and inherited by the worker process.
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")


async def test_long_poll_and_webhook_through_a_worker_process(
    allow_loopback: None,
    redis_platform: Platform,  # noqa: F811
) -> None:
    platform = redis_platform
    assert not platform.execution.in_process
    await platform.user("alice")
    report = await published(platform)
    with receiver() as hook_receiver:
        created = await platform.client.post(
            "/webhooks",
            json={"url": hook_receiver.url, "types": ["calcgraph.job.succeeded"]},
            headers=platform.headers(),
        )
        assert created.status_code == 201, created.text
        start = (await events(platform, after="now"))["next_cursor"]
        poll = asyncio.create_task(
            events(platform, after=start, wait=25, type="calcgraph.job.succeeded")
        )
        await asyncio.sleep(0.3)
        queued = await platform.execute(
            f"/packages/{report['package_id']}/functions/run/execute", {"x": 5.0}, wait=0
        )
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["job_id"]
        body = await poll
        assert [e["subject"] for e in body["items"]] == [job_id]
        got = await asyncio.to_thread(hook_receiver.wait_for, 1, 60.0)
        assert got, "the worker process delivered nothing"
        assert json.loads(got[0].body)["subject"] == job_id


@pytest.fixture
def isolating(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read by the API's settings and inherited by the worker process.
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_DELIVERY_PER_WEBHOOK", "1")
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_RETRY_SCHEDULE", "3600")
    monkeypatch.setenv("CALCGRAPH_WEBHOOK_DISPATCH_INTERVAL_SECONDS", "0.1")


async def test_the_worker_process_records_jobs_and_isolates_a_hanging_receiver(
    isolating: None,
    redis_platform: Platform,  # noqa: F811
) -> None:
    """Through Redis and a `calcgraph worker`: the jobs' events (started, succeeded, failed)
    are recorded by the worker's units of work and read through the API; a receiver that
    holds every request delays neither the jobs nor another webhook's deliveries, and has at
    most its one slot in flight; a test event reaches only its own webhook."""
    platform = redis_platform
    await platform.user("alice")
    report = await published(platform)
    path = f"/packages/{report['package_id']}/functions/run/execute"
    with receiver("hold") as hanging, receiver() as prompt:
        hooks = []
        for url in (hanging.url, prompt.url):
            created = await platform.client.post(
                "/webhooks",
                json={"url": url, "types": ["calcgraph.job.*", "calcgraph.calculation.started"]},
                headers=platform.headers(),
            )
            assert created.status_code == 201, created.text
            hooks.append(created.json())
        start = (await events(platform, after="now"))["next_cursor"]
        jobs: dict[str, str] = {}
        for x in (1.0, -1.0, 2.0, 3.0):
            answer = await platform.execute(path, {"x": x}, wait=30)
            assert answer.status_code == 200, answer.text
            jobs[answer.json()["job_id"]] = answer.json()["status"]
        assert sorted(jobs.values()) == ["failed", "success", "success", "success"]
        # started + ended per job, to the prompt receiver, while the other one holds.
        got = await asyncio.to_thread(prompt.wait_for, 2 * len(jobs), 60.0)
        delivered = [(json.loads(r.body)["type"], json.loads(r.body)["subject"]) for r in got]
        for job_id, status in jobs.items():
            ended = "calcgraph.job.succeeded" if status == "success" else "calcgraph.job.failed"
            assert ("calcgraph.calculation.started", job_id) in delivered
            assert (ended, job_id) in delivered
        assert await asyncio.to_thread(hanging.wait_for, 1, 60.0)
        assert hanging.most_in_flight == 1
        hanging.released.set()
        body = await events(platform, after=start, limit=500)
        recorded = {(e["type"], e["subject"]) for e in body["items"]}
        assert set(delivered) <= recorded
        tested = await platform.client.post(
            f"/webhooks/{hooks[1]['id']}/test", headers=platform.headers()
        )
        assert tested.status_code == 202
        event_id = tested.json()["event_id"]

        def test_event_arrived() -> bool:
            return any(r.headers["webhook-id"] == event_id for r in prompt.received)

        for _ in range(600):
            if test_event_arrived():
                break
            await asyncio.sleep(0.1)
        assert test_event_arrived()
        assert all(r.headers["webhook-id"] != event_id for r in hanging.received)
