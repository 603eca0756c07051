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
