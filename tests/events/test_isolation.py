"""A slow or dead receiver delays nobody else (contract section 9, issue 23): webhook attempts
run asynchronously in the worker process, at most `webhook_delivery_per_webhook` in flight to
one webhook, never on the job threads. One receiver holds every request it gets; another
answers at once; jobs keep running."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.events.helpers import published
from tests.events.receiver import receiver
from tests.execution.conftest import Platform, default_sandbox, running_platform

pytestmark = pytest.mark.db
JOBS = 6


@pytest.fixture
async def isolated(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    async with running_platform(
        exec_url,
        identity_provider,
        tmp_path,
        default_sandbox(),
        webhook_allowed_hosts=["127.0.0.1"],
        webhook_dispatch_interval_seconds=0.1,
        webhook_delivery_per_webhook=1,
        webhook_retry_schedule=[3600],
        inprocess_worker_threads=2,
    ) as p:
        yield p


async def test_a_hanging_receiver_delays_neither_jobs_nor_other_webhooks(
    isolated: Platform,
) -> None:
    platform = isolated
    await platform.user("alice")
    report = await published(platform)
    path = f"/packages/{report['package_id']}/functions/run/execute"
    types = ["calcgraph.job.succeeded"]
    with receiver("hold") as hanging, receiver() as prompt:
        for url in (hanging.url, prompt.url):
            created = await platform.client.post(
                "/webhooks", json={"url": url, "types": types}, headers=platform.headers()
            )
            assert created.status_code == 201, created.text
        jobs = []
        for n in range(JOBS):
            # More jobs than job threads, each waited for: a job thread held by a delivery
            # would leave these queued (202) once the hanging receiver had two of them.
            answer = await platform.execute(path, {"x": float(n + 1)}, wait=20)
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "success"
            jobs.append(answer.json()["job_id"])
        got = await asyncio.to_thread(prompt.wait_for, JOBS, 60.0)
        assert sorted(json.loads(r.body)["subject"] for r in got) == sorted(jobs)
        # Meanwhile the hanging receiver has its first request, and never more than one at
        # once (its webhook's one slot), whatever was due for it.
        assert await asyncio.to_thread(hanging.wait_for, 1, 60.0)
        assert hanging.most_in_flight == 1
        hanging.released.set()
