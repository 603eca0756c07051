"""A `calcgraph worker` process killed with SIGKILL in the middle of webhook deliveries (Redis
broker, a real receiver on loopback): once another worker starts, every event is delivered
(at least once: duplicates allowed, none lost). The lease is short here
(`CALCGRAPH_WEBHOOK_DELIVERY_LEASE_SECONDS`) so that the killed worker's attempts come due again
quickly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.auth.idp import LocalIdentityProvider
from tests.events.helpers import published
from tests.events.receiver import Receiver, receiver
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.test_redis import REDIS_URL, _redis_or_skip, _start_worker

pytestmark = pytest.mark.db

TEST_EVENTS = 4


@dataclass
class Killable:
    platform: Platform
    env: dict[str, str]
    worker: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.worker.kill()  # SIGKILL: no cleanup, no acknowledgement, leases held
        self.worker.communicate(timeout=30)  # reaped, its stderr pipe closed

    def restart(self) -> None:
        self.worker = _start_worker(self.env)


@pytest.fixture
async def killable(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Killable]:
    _redis_or_skip()
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    sandbox = default_sandbox()
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": exec_url,
        "CALCGRAPH_REDIS_URL": REDIS_URL,
        "CALCGRAPH_REDIS_KEY_PREFIX": prefix,
        "CALCGRAPH_SANDBOX": sandbox,
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp_path / "worker-code"),
        "CALCGRAPH_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "CALCGRAPH_WEBHOOK_DISPATCH_INTERVAL_SECONDS": "0.1",
        "CALCGRAPH_WEBHOOK_DELIVERY_LEASE_SECONDS": "2",
    }
    state = Killable(None, env, _start_worker(env))  # type: ignore[arg-type]
    try:
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            sandbox,
            redis_url=REDIS_URL,
            redis_key_prefix=prefix,
            webhook_allowed_hosts=["127.0.0.1"],
        ) as platform:
            state.platform = platform
            yield state
    finally:
        worker = state.worker
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.communicate()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()


def _ids(hook: Receiver, start: int) -> set[str]:
    with hook.arrived:  # (a reentrant lock: also called while waiting on it)
        return {r.headers["webhook-id"] for r in hook.received[start:]}


async def test_events_survive_a_killed_worker(killable: Killable) -> None:
    platform = killable.platform
    assert not platform.execution.in_process
    await platform.user("alice")
    report = await published(platform)
    headers = platform.headers()
    with receiver("hold") as hook_receiver:
        created = await platform.client.post(
            "/webhooks",
            json={"url": hook_receiver.url, "types": ["calcgraph.job.*"]},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        hook = created.json()
        run = await platform.execute(
            f"/packages/{report['package_id']}/functions/run/execute", {"x": 3.0}, wait=60
        )
        assert run.status_code == 200, run.text
        job_id = run.json()["job_id"]
        expected: set[str] = set()
        for _ in range(TEST_EVENTS):
            tested = await platform.client.post(f"/webhooks/{hook['id']}/test", headers=headers)
            assert tested.status_code == 202, tested.text
            expected.add(tested.json()["event_id"])
        job_events = await platform.client.get(
            "/events", params={"type": "calcgraph.job.*"}, headers=headers
        )
        expected |= {e["id"] for e in job_events.json()["items"] if e["subject"] == job_id}
        assert len(expected) > TEST_EVENTS

        # The worker is in the middle of deliveries: the receiver holds their answers.
        assert await asyncio.to_thread(hook_receiver.wait_for, 1, 60.0), "nothing was sent"
        killable.kill()
        with hook_receiver.arrived:
            before = len(hook_receiver.received)
            hook_receiver.mode = "ok"
        hook_receiver.released.set()

        killable.restart()

        def all_arrived() -> bool:
            with hook_receiver.arrived:
                return bool(
                    hook_receiver.arrived.wait_for(
                        lambda: expected <= _ids(hook_receiver, before), 120.0
                    )
                )

        assert await asyncio.to_thread(all_arrived), (
            f"lost after the restart: {expected - _ids(hook_receiver, before)}"
        )
        for got in hook_receiver.received[before:]:
            assert json.loads(got.body)["id"] == got.headers["webhook-id"]

        async def delivered() -> set[str]:
            found = await platform.client.get(
                f"/webhooks/{hook['id']}/deliveries", params={"limit": 100}, headers=headers
            )
            assert found.status_code == 200, found.text
            return {d["event_id"] for d in found.json()["items"] if d["state"] == "delivered"}

        for _ in range(600):
            if expected <= await delivered():
                break
            await asyncio.sleep(0.1)
        assert expected <= await delivered()
