"""The job store as one worker process's threads use it: claims and finishes, grouped.

Every transition is still a guarded UPDATE whose answer says whether this caller made it (see
`JobStoreRepository`). What changes is how many units of work they cost: while one batch's
transaction is in flight on the runtime's loop, the requests of the other worker threads queue,
and the next transaction carries all of them (one `UPDATE ... WHERE id IN (...) AND
status = 'queued' RETURNING` for the claims). An idle worker's single request goes at once: no
timer, no added latency; a busy one pays one session, pool checkout and commit per batch instead
of two per job.

A batch that fails is split: each of its requests runs again alone, so one request that cannot
be written (say, logs PostgreSQL refuses) fails only its own caller, whose retry policy applies
as before; a database that is down fails each of them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from calcgraph.db.base import new_id
from calcgraph.db.engine import Database
from calcgraph.domain.jobs.store.repository import ClaimedRow, Finish
from calcgraph.domain.jobs.store.service import RightsLost
from calcgraph.domain.jobs.store.service import job_store_service as service

MAX_BATCH = 64


@dataclass
class _Request:
    future: asyncio.Future[Any]
    claim: str | None = None
    finish: Finish | None = None


class JobStore:
    """Use from the runtime's event loop only (worker threads go through `runtime.call`)."""

    def __init__(self, database: Database, max_batch: int = MAX_BATCH) -> None:
        self.database = database
        self.max_batch = max_batch
        self._pending: list[_Request] = []
        self._flushing: asyncio.Task[None] | None = None
        self.batches = 0
        """Transactions run (with `requests`: how well requests group, for tests and tuning)."""
        self.requests = 0

    async def claim(self, job_id: str) -> ClaimedRow | None:
        """queued -> running under a new lease (the row says which); None when another
        delivery claimed (or finished) it first."""
        future: asyncio.Future[ClaimedRow | None] = asyncio.get_running_loop().create_future()
        self._submit(_Request(future, claim=job_id))
        return await future

    async def finish(self, finish: Finish) -> bool:
        """running -> success/failed; False when the job was not running under the finish's
        lease (already recorded, or handed to another worker)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._submit(_Request(future, finish=finish))
        return await future

    def _submit(self, request: _Request) -> None:
        self._pending.append(request)
        if self._flushing is None:
            # Held here: the loop keeps only a weak reference to its tasks.
            self._flushing = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            # Let the requests already handed to the loop join the first batch.
            await asyncio.sleep(0)
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                await self._run(batch)
        finally:
            self._flushing = None

    async def _run(self, batch: list[_Request], fold: bool = True) -> None:
        claims = [r.claim for r in batch if r.claim is not None]
        finishes = [r.finish for r in batch if r.finish is not None]
        try:
            async with self.database.write_session() as session:
                # One lease per batch: a job is claimed at most once in it.
                claimed, finished = await service.claim_and_finish(
                    session, claims, finishes, new_id(), fold=fold
                )
        except RightsLost:
            await self._run(batch, fold=False)
            return
        except Exception as exc:
            if len(batch) > 1:
                for request in batch:
                    await self._run([request], fold)
            elif not batch[0].future.done():
                batch[0].future.set_exception(exc)
            return
        self.batches += 1
        self.requests += len(batch)
        for request in batch:
            if request.future.done():  # its caller was cancelled
                continue
            if request.claim is not None:
                # Two deliveries of one job in one batch: the row goes to the first only.
                row = claimed.pop(request.claim, None)
                request.future.set_result(row)
            elif request.finish is not None:
                ok = request.finish.job_id in finished
                finished.discard(request.finish.job_id)
                request.future.set_result(ok)
