"""Leases, heartbeats and the sweeper (issue 12 hole 7, issue 14): a job whose worker stopped
beating goes to another worker and the old one cannot record over it; a job whose message
merely waits in the queue is neither re-sent nor given up."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from pathlib import Path

import dramatiq
import pytest
import redis

from calcgraph.db.base import utcnow
from calcgraph.domain.jobs.enqueue import Message, job_message_id
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.store.repository import Finish
from calcgraph.domain.jobs.store.service import job_store_service
from calcgraph.domain.jobs.sweep.service import job_sweep_service
from calcgraph.domain.runs.chains.service import CHAIN_ACTOR
from calcgraph.settings import Settings
from calcgraph.workers.broker import build_broker, send, waiting
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.sweeper import Heartbeat
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.factories import deploy
from tests.execution.test_workers import _job, _lost_job, _until_finished
from tests.runs.test_chains_api import _line
from tests.runs.test_chains_api import _package as _chain_package
from tests.runs.test_tick_api import TERMINAL, _start, _tick, _until, _workflow

pytestmark = pytest.mark.db

REDIS_URL = os.environ.get("CALCGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")


async def _row(platform: Platform, job_id: str) -> Job:
    async with platform.database.read_session() as session:
        row = await session.get(Job, job_id)
        assert row is not None
        return row


async def _claim(platform: Platform, job_id: str, lease: str) -> None:
    async with platform.database.write_session() as session:
        assert await job_store_service.claim(session, job_id, lease) is not None


class TestHandOver:
    async def test_a_job_whose_heartbeat_stopped_runs_again_once_and_the_old_lease_is_void(
        self, platform: Platform
    ) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        job_id = await _lost_job(platform, {"x": 2, "y": 3}, (deployed.package_name, "add"))
        # A worker claimed it, then died (kill -9): its heartbeat stopped a minute ago.
        await _claim(platform, job_id, "dead-worker")
        async with platform.database.write_session() as session:
            row = await session.get(Job, job_id)
            assert row is not None
            assert row.lease == "dead-worker"
            row.heartbeat_at = utcnow() - timedelta(minutes=1)
        runs = platform.runtime.runs
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),
            )
        assert report.handed_over == [job_id]
        assert report.stuck == []
        job = await _until_finished(platform, job_id)
        assert job["status"] == "success"
        assert job["outputs"] == {"sum": 5.0}
        assert platform.runtime.runs == runs + 1
        row = await _row(platform, job_id)
        assert row.deliveries == 2
        assert row.lease not in (None, "dead-worker")
        # The old worker was only slow: its result and its release find nothing to change.
        error = {"kind": "user_error", "message": "late"}
        async with platform.database.write_session() as session:
            late = Finish(job_id, Outcome("failed", None, error, ""), "dead-worker")
            assert not await job_store_service.finish(session, late)
            assert not await job_store_service.release(session, job_id, "dead-worker")
        assert (await _job(platform, job_id))["outputs"] == {"sum": 5.0}

    async def test_a_beating_job_is_left_to_its_worker_and_the_round_hands_over_once(
        self, platform: Platform
    ) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        live = await _lost_job(platform, {"x": 1, "y": 1}, (deployed.package_name, "add"))
        await _claim(platform, live, "live-worker")
        async with platform.database.write_session() as session:
            row = await session.get(Job, live)
            assert row is not None
            row.heartbeat_at = utcnow() - timedelta(minutes=5)
        runtime = platform.runtime
        with runtime.leases.holding("live-worker"):
            assert await asyncio.to_thread(Heartbeat(runtime).tick) == 1
        beat = (await _row(platform, live)).heartbeat_at
        assert beat is not None
        assert beat > utcnow() - timedelta(seconds=10)
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),
            )
        assert live not in report.handed_over
        assert (await _row(platform, live)).status == "running"
        # Stopped beating (its last beat five minutes ago): two sweepers at once hand it over
        # once. On the real clock, so that a worker re-claiming the job in between beats fresh.
        async with platform.database.write_session() as session:
            row = await session.get(Job, live)
            assert row is not None
            row.heartbeat_at = utcnow() - timedelta(minutes=5)

        async def sweep() -> list[str]:
            async with platform.database.write_session() as session:
                found = await job_sweep_service.sweep(
                    session,
                    stale_after=3600,
                    max_deliveries=5,
                    stuck_after=400,
                    heartbeat_timeout=30,
                    waiting=lambda ids: set(ids),
                )
            return found.handed_over

        first, second = await sweep(), await sweep()
        assert (first + second).count(live) == 1
        await _until_finished(platform, live)
        assert (await _row(platform, live)).deliveries == 2

    async def test_a_job_that_keeps_losing_its_worker_is_given_up(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        job_id = await _lost_job(platform, {"x": 1, "y": 1}, (deployed.package_name, "add"))
        await _claim(platform, job_id, "dying-worker")
        async with platform.database.write_session() as session:
            row = await session.get(Job, job_id)
            assert row is not None
            row.deliveries, row.heartbeat_at = 5, utcnow() - timedelta(minutes=1)
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),
            )
        assert report.given_up == [job_id]
        job = await _job(platform, job_id)
        assert job["status"] == "failed"
        assert job["error"]["kind"] == "infrastructure_error"
        assert "stopped" in job["error"]["message"]


class TestChainHandOver:
    async def test_a_chain_whose_worker_died_resumes_on_another_and_runs_each_node_once(
        self, platform: Platform
    ) -> None:
        package = await _chain_package(platform)
        slug = await _workflow(platform, _line(package, ["inc", "inc", "inc"]))
        run = await _start(platform, slug, {"x": 1})
        # The tick's message is lost and a worker that claimed the head died.
        attach(platform.database, Outbox(lambda message: None))
        try:
            ticked = await _tick(platform, run["id"])
        finally:
            attach(platform.database, Outbox(platform.execution.send))
        head = ticked["node_states"]["n0"]["job_id"]
        await _claim(platform, head, "dead-worker")
        async with platform.database.write_session() as session:
            row = await session.get(Job, head)
            assert row is not None
            row.heartbeat_at = utcnow() - timedelta(minutes=1)
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),
                node_actor=CHAIN_ACTOR,
            )
        assert report.handed_over == [head]
        done = await _until(platform, run["id"], lambda r: r["status"] in TERMINAL)
        assert done["status"] == "completed", done
        assert done["terminal_outputs"] == {"n2": {"y": 4.0}}
        assert [done["node_states"][key]["attempt"] for key in ("n0", "n1", "n2")] == [1, 1, 1]
        assert (await _row(platform, head)).deliveries == 2


class TestWaitingInTheQueue:
    async def test_jobs_waiting_for_a_worker_are_neither_re_sent_nor_given_up(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        """Issue 14: with more jobs than worker threads, old queued jobs are waiting, not lost."""
        async with running_platform(
            exec_url,
            identity_provider,
            tmp_path,
            default_sandbox(),
            inprocess_worker_threads=1,
            sweeper_stale_seconds=0.2,
        ) as platform:
            alice = await platform.user("alice")
            deployed = await deploy(platform.database, alice)
            path = f"/packages/{deployed.package_name}/functions/slow/execute"
            ids = []
            for index in range(4):
                response = await platform.execute(path, {"x": 0.6 + index / 100}, wait=0)
                assert response.status_code == 202, response.text
                ids.append(response.json()["job_id"])
            sweeper = platform.execution.sweeper
            assert sweeper is not None
            await asyncio.sleep(0.5)
            report = await asyncio.to_thread(sweeper.tick)
            assert report.resent == []
            assert report.waiting >= 1
            # Long past any age limit, one delivery allowed: a waiting job is still no loss.
            async with platform.database.write_session() as session:
                broker = platform.execution.broker
                strict = await job_sweep_service.sweep(
                    session,
                    stale_after=0.1,
                    max_deliveries=1,
                    stuck_after=86400,
                    heartbeat_timeout=86400,  # the running one is left alone here
                    waiting=lambda message_ids: waiting(broker, message_ids),
                    now=utcnow() + timedelta(hours=1),
                )
            assert strict.given_up == []
            assert strict.resent == []
            for job_id in ids:
                job = await _until_finished(platform, job_id)
                assert job["status"] == "success", job
                assert (await _row(platform, job_id)).deliveries == 1


class TestRedisProbe:
    def test_the_redis_broker_says_which_job_messages_wait(self) -> None:
        try:
            redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
        except redis.RedisError as exc:
            pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
        prefix = f"test-probe-{uuid.uuid4().hex[:8]}:"
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None, redis_url=REDIS_URL, redis_key_prefix=prefix
        )
        broker = build_broker(settings)
        try:
            sent, retried, never = (job_message_id(str(uuid.uuid4()), 1) for _ in range(3))
            send(broker, Message("jobs.run", {"job_id": "a"}, sent))
            assert waiting(broker, [sent, never]) == {sent}
            # A retry waits in the delay queue under its retry count (enqueued as the Retries
            # middleware does).
            broker.enqueue(
                dramatiq.Message(
                    queue_name="calcgraph.jobs",
                    actor_name="jobs.run",
                    args=(),
                    kwargs={"job_id": "b"},
                    options={"retries": 2},
                    message_id=retried,
                ),
                delay=60_000,
            )
            assert waiting(broker, [retried], max_retries=0) == set()
            assert waiting(broker, [sent, retried, never], max_retries=3) == {sent, retried}
        finally:
            broker.close()
            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(f"{prefix}*"))
            if keys:
                client.delete(*keys)
            client.close()
