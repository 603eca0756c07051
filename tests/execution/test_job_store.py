"""The worker's batched job store: grouped claims and finishes keep every transition guarded,
so a job is claimed once however many workers (each with its own engine: real parallel
sessions) ask for it at the same time, and a result is recorded once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from calcgraph.db.engine import Database
from calcgraph.domain.events.models import Event
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.store.repository import Finish
from calcgraph.domain.jobs.submission.service import job_submission_service
from calcgraph.domain.packages.addressing import ExecuteAddress
from calcgraph.workers.event_signal import attach_signal
from calcgraph.workers.flush import Outbox, attach
from calcgraph.workers.job_store import JobStore
from calcgraph.workers.notify import LocalNotifier
from calcgraph.workers.result_cache import InProcessResultCache
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.execution.factories import deploy

pytestmark = pytest.mark.db


@pytest.fixture
async def database(exec_url: str) -> AsyncIterator[Database]:
    database = Database(exec_url)
    # Messages of the jobs made here are dropped: the stores below are the only claimers.
    attach(database, Outbox(lambda message: None))
    yield database
    await database.dispose()


async def _queued(
    database: Database, identity_provider: LocalIdentityProvider, count: int
) -> list[str]:
    alice = await create_user(database, identity_provider, "alice")
    deployed = await deploy(database, alice)
    address = ExecuteAddress.by_path(deployed.package_name, "add")
    ids = []
    salt = random.random()
    for i in range(count):
        async with database.write_session() as session:
            job = (
                await job_submission_service.submit_call(
                    session, alice, address, {"x": salt + i, "y": 1}, InProcessResultCache()
                )
            ).job
        assert job.status == "queued"
        ids.append(job.id)
    return ids


async def _row(database: Database, job_id: str) -> Job:
    async with database.read_session() as session:
        job = await session.get(Job, job_id)
        assert job is not None
        return job


async def test_concurrent_workers_claim_each_job_exactly_once(
    database: Database, identity_provider: LocalIdentityProvider, exec_url: str
) -> None:
    ids = await _queued(database, identity_provider, 40)
    workers = [Database(exec_url) for _ in range(4)]
    stores = [JobStore(worker) for worker in workers]
    try:
        # Every worker asks for every job (a redelivery storm), in its own order, at once.
        requests = []
        for store in stores:
            order = random.sample(ids, len(ids))
            requests += [(job_id, store.claim(job_id)) for job_id in order]
        answers = await asyncio.gather(*(claim for _, claim in requests))
    finally:
        for worker in workers:
            await worker.dispose()
    winners: dict[str, int] = {}
    for (job_id, _), row in zip(requests, answers, strict=True):
        if row is not None:
            assert row.job_id == job_id
            assert row.resolved_inputs["y"] == 1
            winners[job_id] = winners.get(job_id, 0) + 1
    assert winners == {job_id: 1 for job_id in ids}
    # The requests of each worker went in fewer transactions than requests.
    assert all(store.batches < store.requests for store in stores)
    for job_id in ids:
        assert (await _row(database, job_id)).status == "running"


async def test_two_deliveries_in_one_batch_give_the_row_to_one(
    database: Database, identity_provider: LocalIdentityProvider
) -> None:
    (job_id,) = await _queued(database, identity_provider, 1)
    store = JobStore(database)
    first, second = await asyncio.gather(store.claim(job_id), store.claim(job_id))
    assert store.batches == 1
    assert [first is not None, second is not None] == [True, False]
    assert await store.claim(job_id) is None


async def test_finishes_record_once_with_their_own_values(
    database: Database, identity_provider: LocalIdentityProvider
) -> None:
    ok_id, failed_id, queued_id = await _queued(database, identity_provider, 3)
    store = JobStore(database)
    ok_claim, failed_claim = await asyncio.gather(store.claim(ok_id), store.claim(failed_id))
    assert ok_claim is not None
    assert failed_claim is not None
    lease = ok_claim.lease
    error = {"kind": "user_error", "message": "boom"}
    recorded = await asyncio.gather(
        store.finish(Finish(ok_id, Outcome("success", {"sum": 2.0}, None, "out"), lease)),
        store.finish(Finish(failed_id, Outcome("failed", None, error, "err"), failed_claim.lease)),
        # never claimed
        store.finish(Finish(queued_id, Outcome("success", {"sum": 9.0}, None, ""), lease)),
    )
    assert recorded == [True, True, False]
    ok, failed, queued = [await _row(database, i) for i in (ok_id, failed_id, queued_id)]
    assert (ok.status, ok.outputs, ok.error, ok.logs) == ("success", {"sum": 2.0}, None, "out")
    assert (failed.status, failed.outputs, failed.error) == ("failed", None, error)
    assert ok.finished_at is not None
    assert ok.started_at is not None
    assert queued.status == "queued"
    assert queued.outputs is None
    # A second record of a finished job (a redelivery that raced) changes nothing.
    again = Finish(ok_id, Outcome("failed", None, error, ""), lease)
    assert await store.finish(again) is False
    assert (await _row(database, ok_id)).status == "success"


async def test_each_transition_commits_its_numbered_event_once(
    database: Database, identity_provider: LocalIdentityProvider
) -> None:
    """With the event signal (a worker's units hold their events for their last statement,
    which on PostgreSQL also makes the batch's last claim or finish), each claim and each
    finish that took effect commits its event, numbered, with what it says; one that took no
    effect commits none."""
    attach_signal(database, LocalNotifier())
    ok_id, failed_id, queued_id = await _queued(database, identity_provider, 3)
    ids = (ok_id, failed_id, queued_id)
    store = JobStore(database)
    ok_claim, failed_claim = await asyncio.gather(store.claim(ok_id), store.claim(failed_id))
    assert ok_claim is not None
    assert failed_claim is not None
    assert await store.claim(ok_id) is None  # claimed already: no second start
    error = {"kind": "user_error", "message": "boom", "traceback": "..."}
    recorded = await asyncio.gather(
        store.finish(Finish(ok_id, Outcome("success", {"sum": 2.0}, None, "out"), ok_claim.lease)),
        store.finish(Finish(failed_id, Outcome("failed", None, error, "err"), failed_claim.lease)),
        store.finish(Finish(queued_id, Outcome("success", {"sum": 9.0}, None, ""), "x")),
    )
    assert recorded == [True, True, False]
    async with database.read_session() as session:
        events = list(
            await session.scalars(select(Event).where(Event.subject.in_(ids)).order_by(Event.id))
        )
    assert all(e.position is not None for e in events)
    assert len({e.position for e in events}) == len(events)
    assert all((e.subject_kind, e.run_id) == ("job", None) for e in events)
    claimed = (await _row(database, ok_id), await _row(database, failed_id))
    found = sorted((e.subject, e.type, sorted(e.data.items())) for e in events)
    started = [
        (
            job.id,
            "calcgraph.calculation.started",
            sorted(
                {
                    "job_id": job.id,
                    "function": job.function_id,
                    "function_version_id": job.function_version_id,
                    "run_id": None,
                    "node_key": None,
                }.items()
            ),
        )
        for job in claimed
    ]
    ended = [
        (
            ok_id,
            "calcgraph.job.succeeded",
            sorted(
                {
                    "job_id": ok_id,
                    "status": "success",
                    "error": None,
                    "run_id": None,
                    "node_key": None,
                }.items()
            ),
        ),
        (
            failed_id,
            "calcgraph.job.failed",
            sorted(
                {
                    "job_id": failed_id,
                    "status": "failed",
                    "error": {"kind": "user_error", "message": "boom"},
                    "run_id": None,
                    "node_key": None,
                }.items()
            ),
        ),
    ]
    assert found == sorted(started + ended)
    # Within a job, its start before its end.
    by_job = {e.subject: [] for e in events}
    for e in sorted(events, key=lambda e: e.position or 0):
        by_job[e.subject].append(e.type)
    assert by_job[ok_id] == ["calcgraph.calculation.started", "calcgraph.job.succeeded"]


async def test_a_failed_batch_fails_its_requests_and_the_store_goes_on(
    database: Database, identity_provider: LocalIdentityProvider, exec_url: str
) -> None:
    (job_id,) = await _queued(database, identity_provider, 1)
    unreachable = Database(
        exec_url.replace("127.0.0.1:5432", "127.0.0.1:1")
        if exec_url.startswith("postgresql")
        else "sqlite+aiosqlite:////nonexistent-dir/calcgraph.db"
    )
    store = JobStore(unreachable)
    try:
        answers = await asyncio.gather(
            store.claim(job_id), store.claim(job_id), return_exceptions=True
        )
    finally:
        await unreachable.dispose()
    assert all(isinstance(answer, Exception) for answer in answers)
    assert (await _row(database, job_id)).status == "queued"
    store.database = database  # the database is back
    assert await store.claim(job_id) is not None


async def test_a_request_that_cannot_be_written_fails_alone(
    database: Database, identity_provider: LocalIdentityProvider
) -> None:
    claimed_id, poisoned_id, other_id = await _queued(database, identity_provider, 3)
    store = JobStore(database)
    poisoned = await store.claim(poisoned_id)
    assert poisoned is not None
    # A set is no JSON: this finish can never be written, whatever the database.
    poison = Finish(
        poisoned_id, Outcome("failed", None, {"kind": {"not", "json"}}, ""), poisoned.lease
    )
    answers = await asyncio.gather(
        store.claim(claimed_id),
        store.finish(poison),
        store.claim(other_id),
        return_exceptions=True,
    )
    assert store.batches >= 2  # the failed batch was split
    claimed, failed, other = answers
    assert isinstance(failed, Exception)
    assert not isinstance(claimed, BaseException)
    assert claimed is not None
    assert claimed.job_id == claimed_id
    assert not isinstance(other, BaseException)
    assert other is not None
    assert (await _row(database, poisoned_id)).status == "running"
