"""Broker, outbox, actor and sweeper: jobs after commit, once, and never lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.enqueue import Message, NoOutbox, enqueue
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.submission.service import job_submission_service
from calcgraph.domain.jobs.sweep.service import job_sweep_service
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.settings import Settings
from calcgraph.workers.broker import QUEUE, build_broker
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.result_cache import InProcessResultCache
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, default_sandbox, running_platform
from tests.execution.factories import deploy

pytestmark = pytest.mark.db


def _settings(url: str) -> Settings:
    return Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]


async def _job(platform: Platform, job_id: str) -> dict[str, Any]:
    response = await platform.client.get(f"/jobs/{job_id}", headers=platform.headers("alice"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _until_finished(platform: Platform, job_id: str) -> dict[str, Any]:
    for _ in range(400):
        job = await _job(platform, job_id)
        if job["status"] in ("success", "failed"):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


async def _join(platform: Platform) -> None:
    def join() -> None:
        platform.execution.broker.join(QUEUE)
        assert platform.execution.worker is not None
        platform.execution.worker.join()

    await asyncio.to_thread(join)


async def _lost_job(platform: Platform, inputs: dict[str, Any], path: tuple[str, str]) -> str:
    """Submit a job whose message is lost: its unit of work's outbox drops what it sends."""
    principal = await platform.user("alice")
    lossy = Database(platform.settings.database_url)
    attach(lossy, Outbox(lambda message: None))
    try:
        async with lossy.write_session() as session:
            job = (
                await job_submission_service.submit_call(
                    session,
                    principal,
                    ExecuteAddress.by_path(*path),
                    inputs,
                    InProcessResultCache(),
                )
            ).job
    finally:
        await lossy.dispose()
    return job.id


class TestOutbox:
    async def test_messages_leave_after_commit_and_never_after_rollback(
        self, exec_url: str
    ) -> None:
        broker = build_broker(_settings(exec_url))
        database = Database(exec_url)
        sent: list[Message] = []
        attach(database, Outbox(sent.append))

        async def rolled_back() -> None:
            async with database.write_session():
                enqueue("jobs.run", job_id="a")
                assert sent == []  # not before the commit
                raise RuntimeError("boom")

        try:
            with pytest.raises(RuntimeError, match="boom"):
                await rolled_back()
            assert sent == []
            async with database.write_session():
                enqueue("jobs.run", job_id="b")
                enqueue("jobs.run", job_id="c")
                assert sent == []
            assert [m.kwargs["job_id"] for m in sent] == ["b", "c"]
            with pytest.raises(NoOutbox):
                enqueue("jobs.run", job_id="d")
            async with database.read_session():
                with pytest.raises(NoOutbox):
                    enqueue("jobs.run", job_id="e")
            with pytest.raises(TypeError):
                async with database.write_session():
                    enqueue("jobs.run", job={"not": "a scalar"})  # type: ignore[arg-type]
        finally:
            await database.dispose()
            broker.close()

    async def test_a_rolled_back_execute_sends_nothing(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        stub_queue = platform.execution.broker.queues[QUEUE]  # type: ignore[attr-defined]
        runs = platform.runtime.runs
        submitted: list[str] = []

        async def rolled_back() -> None:
            async with platform.database.write_session() as session:
                job = (
                    await job_submission_service.submit_call(
                        session,
                        alice,
                        ExecuteAddress.by_path(deployed.package_name, "add"),
                        {"x": 1, "y": 1},
                        platform.execution.cache,
                    )
                ).job
                submitted.append(job.id)
                raise RuntimeError("the door failed after submitting")

        with pytest.raises(RuntimeError):
            await rolled_back()
        await _join(platform)
        assert stub_queue.qsize() == 0
        assert platform.runtime.runs == runs
        async with platform.database.read_session() as session:
            assert await session.get(Job, submitted[0]) is None


class TestActor:
    async def test_a_redelivered_message_never_runs_a_finished_job_again(
        self, platform: Platform
    ) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/add/execute", {"x": 4, "y": 5}
        )
        job_id = response.json()["job_id"]
        before = await _job(platform, job_id)
        runs = platform.runtime.runs
        for _ in range(2):
            platform.execution.send(Message("jobs.run", {"job_id": job_id}))
        await _join(platform)
        assert platform.runtime.runs == runs
        assert await _job(platform, job_id) == before

    async def test_two_deliveries_of_a_queued_job_run_it_once(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        job_id = await _lost_job(platform, {"x": 1, "y": 1}, (deployed.package_name, "add"))
        runs = platform.runtime.runs
        for _ in range(3):
            platform.execution.send(Message("jobs.run", {"job_id": job_id}))
        await _join(platform)
        job = await _until_finished(platform, job_id)
        assert job["status"] == "success"
        assert platform.runtime.runs == runs + 1

    async def test_a_timeout_is_classified(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        async with running_platform(
            exec_url, identity_provider, tmp_path, default_sandbox(), sandbox_timeout_seconds=1.0
        ) as platform:
            alice = await platform.user("alice")
            deployed = await deploy(platform.database, alice)
            response = await platform.execute(
                f"/packages/{deployed.package_name}/functions/slow/execute", {"x": 30}
            )
            body = response.json()
            assert body["status"] == "failed", body
            assert body["error"]["kind"] == "timeout"

    async def test_infrastructure_failures_are_retried_then_recorded(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        async with running_platform(
            exec_url, identity_provider, tmp_path, default_sandbox(), job_max_retries=2
        ) as platform:
            alice = await platform.user("alice")
            deployed = await deploy(platform.database, alice)
            # The deployment names a code blob that is not stored: the platform, not the
            # job, is at fault.
            async with platform.database.write_session() as session:
                from calcgraph.domain.packages.models import PackageVersion

                version = await session.get(PackageVersion, deployed.package_version_id)
                assert version is not None
                version.files = {"main.py": "0" * 64}
            response = await platform.execute(
                f"/packages/{deployed.package_name}/functions/add/execute", {"x": 1, "y": 2}
            )
            body = response.json()
            assert body["status"] == "failed", body
            assert body["error"]["kind"] == "infrastructure_error"
            assert "missing" in body["error"]["message"]
            assert platform.runtime.runs == 0


class TestSweeper:
    async def test_a_lost_message_is_sent_again(
        self, exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
    ) -> None:
        async with running_platform(
            exec_url, identity_provider, tmp_path, default_sandbox(), sweeper_stale_seconds=0.3
        ) as platform:
            alice = await platform.user("alice")
            deployed = await deploy(platform.database, alice)
            job_id = await _lost_job(platform, {"x": 2, "y": 2}, (deployed.package_name, "add"))
            await asyncio.sleep(0.5)
            assert (await _job(platform, job_id))["status"] == "queued"
            sweeper = platform.execution.sweeper
            assert sweeper is not None
            report = await asyncio.to_thread(sweeper.tick)
            assert report.resent == [job_id]
            job = await _until_finished(platform, job_id)
            assert job["status"] == "success"
            assert job["outputs"] == {"sum": 4.0}
            async with platform.database.read_session() as session:
                row = await session.get(Job, job_id)
                assert row is not None
                assert row.deliveries == 2
            # Finished jobs are never re-sent.
            again = await asyncio.to_thread(sweeper.tick)
            assert job_id not in again.resent

    async def test_a_job_no_worker_takes_is_given_up(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        job_id = await _lost_job(platform, {"x": 1, "y": 1}, (deployed.package_name, "add"))
        async with platform.database.write_session() as session:
            row = await session.get(Job, job_id)
            assert row is not None
            row.deliveries = 5
        later = utcnow().replace(year=utcnow().year + 1)
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),  # the broker holds none of its messages
                now=later,
            )
        assert job_id in report.given_up
        job = await _job(platform, job_id)
        assert job["status"] == "failed"
        assert job["error"]["kind"] == "infrastructure_error"

    async def test_a_job_whose_worker_died_is_failed(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        job_id = await _lost_job(platform, {"x": 1, "y": 1}, (deployed.package_name, "add"))
        async with platform.database.write_session() as session:
            row = await session.get(Job, job_id)
            assert row is not None
            row.status, row.started_at = "running", utcnow()
        later = utcnow().replace(year=utcnow().year + 1)
        async with platform.database.write_session() as session:
            report = await job_sweep_service.sweep(
                session,
                stale_after=30,
                max_deliveries=5,
                stuck_after=400,
                heartbeat_timeout=30,
                waiting=lambda ids: set(),
                now=later,
            )
        assert job_id in report.stuck
        job = await _job(platform, job_id)
        assert job["status"] == "failed"
        assert "stopped" in job["error"]["message"]


class TestResultCache:
    async def test_same_version_and_si_inputs_answer_from_the_cache(
        self, platform: Platform
    ) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        path = f"/packages/{deployed.package_name}/functions/double/execute"
        first = (await platform.execute(path, {"length": {"value": 250, "unit": "mm"}})).json()
        assert first["status"] == "success"
        runs = platform.runtime.runs
        second = (await platform.execute(path, {"length": 0.25})).json()
        assert second["status"] == "success"
        assert second["outputs"] == first["outputs"]
        assert second["job_id"] != first["job_id"]
        assert platform.runtime.runs == runs
        job = await _job(platform, second["job_id"])
        assert job["cache_hit"] is True
        assert job["inputs"] == {"length": 0.25}
        assert (await _job(platform, first["job_id"]))["cache_hit"] is False
        # Another version is another key.
        other = (await platform.execute(path, {"length": 0.5})).json()
        assert (await _job(platform, other["job_id"]))["cache_hit"] is False
        assert platform.runtime.runs == runs + 1
