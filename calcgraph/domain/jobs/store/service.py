"""The job store's transitions, as the actors make them (each call is one unit of work of an
actor message): claim a job (checking its owner may still execute it), read its code, record
its result, renew its lease, release it for a retry. Submitting is `domain/jobs/submission`,
the sweeper's round `domain/jobs/sweep`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.domain.access.service import access_service
from calcgraph.domain.builds.repository import BuildRepository
from calcgraph.domain.events.catalog import CALCULATION_STARTED
from calcgraph.domain.events.service import (
    held_for_last_statement,
    job_ended_row,
    record_job_transitions,
    record_rows,
    transition_rows,
)
from calcgraph.domain.events.signal import Marks
from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.jobs.store.folded.repository import FoldedJobStoreRepository
from calcgraph.domain.jobs.store.repository import (
    ClaimedRow,
    CodeRow,
    Finish,
    JobStoreRepository,
)
from calcgraph.domain.packages.dependency_rules import staged_files


class RightsLost(Exception):
    """A batch's claim, made with its events (`fold`), found a job whose owner may no longer
    execute it: its unit is rolled back and the batch made again without folding, which
    records that job failed at its claim (it never started)."""


class JobStoreService:
    async def claim(self, session: AsyncSession, job_id: str, lease: str) -> ClaimedRow | None:
        claimed = await JobStoreRepository.from_session(session).claim(job_id, utcnow(), lease)
        if claimed is not None:
            await record_job_transitions(session, started=[job_id])
        return claimed

    async def code(self, session: AsyncSession, function_version_id: str) -> CodeRow | None:
        code = await JobStoreRepository.from_session(session).code_of(function_version_id)
        if code is None:
            return None
        if code.dependencies:
            # Pinned at deployment and staged as they were pinned: no access check here
            # (contract 11; docs/packages.md, "Dependencies").
            code = replace(code, files=staged_files(code.files, code.dependencies))
        build = await BuildRepository.from_session(session).for_function_version(
            function_version_id
        )
        if build is None or build.docker_image is None:
            return code
        return replace(code, build_id=build.id, build_reference=build.docker_image)

    async def mark_pulled(self, session: AsyncSession, build_id: str) -> None:
        """A worker loaded the build's image: retention counts 90 days from the last pull."""
        await BuildRepository.from_session(session).mark_pulled(build_id, utcnow())

    async def blobs(self, session: AsyncSession, digests: list[str]) -> dict[str, bytes]:
        return await JobStoreRepository.from_session(session).blobs(digests)

    async def finish(self, session: AsyncSession, item: Finish) -> bool:
        done = await JobStoreRepository.from_session(session).finish(item, utcnow())
        if done:
            await record_job_transitions(session, ended=[item.job_id])
        return done

    async def claim_and_finish(
        self,
        session: AsyncSession,
        claims: list[str],
        finishes: list[Finish],
        lease: str,
        *,
        fold: bool = True,
    ) -> tuple[dict[str, ClaimedRow], set[str]]:
        """A batch of one worker process's transitions in one unit of work: the claimed rows
        (ids missing: another delivery has them; claimed under `lease`, the batch's token) and
        the ids this batch finished. On PostgreSQL the unit's last statement makes its last
        change and writes its events (`fold`; `RightsLost`: the batch is to be made again
        without it)."""
        repository = FoldedJobStoreRepository.from_session(session)
        now = utcnow()
        held = held_for_last_statement(session) if fold else None
        if held is not None and finishes and not claims:
            return {}, await self._finish_numbered(repository, finishes, now, held)
        if held is not None and claims:
            return await self._claim_numbered(session, repository, claims, finishes, lease, held)
        finished = await repository.finish_many(finishes, now) if finishes else {}
        claimed = await repository.claim_many(claims, now, lease) if claims else {}
        if claimed:
            claimed = await self._refuse_lost_rights(session, repository, claimed, now)
        # Their events in the same commit, from what the UPDATEs returned: one INSERT. A job
        # refused at its claim never started: its event is its end.
        await record_rows(
            session,
            transition_rows((c for c in claimed.values() if not c.refused), finishes, finished),
        )
        refused = [c.job_id for c in claimed.values() if c.refused]
        if refused:
            await record_job_transitions(session, ended=refused)
        return claimed, set(finished)

    async def _claim_numbered(
        self,
        session: AsyncSession,
        repository: FoldedJobStoreRepository,
        claims: list[str],
        finishes: list[Finish],
        lease: str,
        held: Marks,
    ) -> tuple[dict[str, ClaimedRow], set[str]]:
        """A batch whose claims, made last, write the unit's events with them (PostgreSQL: one
        statement fewer per unit): the events held before it, the claimed jobs' starts, then
        the finished jobs' ends, as `transition_rows` orders them. A job whose owner lost the
        right to execute it raises `RightsLost`: it ends at its claim, with no start."""
        now = utcnow()
        finished = await repository.finish_many(finishes, now) if finishes else {}
        rows = held.take()
        ended = transition_rows((), finishes, finished)
        slotted = list(enumerate(rows))
        slotted += [(len(rows) + 1 + i, row) for i, row in enumerate(ended)]
        started = {"type": CALCULATION_STARTED, "recorded_at": utcnow()}
        claimed = await repository.claim_numbered(claims, now, lease, started, len(rows), slotted)
        if await self._refused(session, claimed):
            raise RightsLost()
        held.written(ended)
        held.written(
            {"type": started["type"], "run_id": c.workflow_run_id} for c in claimed.values()
        )
        return claimed, set(finished)

    async def _finish_numbered(
        self,
        repository: FoldedJobStoreRepository,
        finishes: list[Finish],
        now: datetime,
        held: Marks,
    ) -> set[str]:
        """A batch of finishes whose last (in id order, the order they lock their rows) is
        made by the unit's last statement, which writes the unit's events with it (PostgreSQL:
        one statement fewer per unit). The events are those `transition_rows` gives, in its
        order, after the ones the unit held already."""
        ordered = sorted(finishes, key=lambda f: f.job_id)
        last = ordered[-1]
        finished = await repository.finish_many(ordered[:-1], now) if len(ordered) > 1 else {}
        rows = held.take()
        place = {job_id: len(rows) + i for i, job_id in enumerate(_ended_order(finishes))}
        slotted = list(enumerate(rows))
        ended = transition_rows((), finishes, finished)
        slotted += [(place[row["subject"]], row) for row in ended]
        held.written(ended)
        event = job_ended_row(
            {
                "id": last.job_id,
                "status": last.outcome.status,
                "error": last.outcome.error,
                "workflow_run_id": None,
                "node_key": None,
            }
        )
        # The job's run and node come from its row, in the statement.
        done = await repository.finish_numbered(last, now, event, place[last.job_id], slotted)
        if done is not None:
            finished[last.job_id] = done
            held.written([{"type": event["type"], "run_id": done[0]}])
        return set(finished)

    async def _refuse_lost_rights(
        self,
        session: AsyncSession,
        repository: JobStoreRepository,
        claimed: dict[str, ClaimedRow],
        now: datetime,
    ) -> dict[str, ClaimedRow]:
        """Access at every act (contract section 8b): a job waited in the queue since its
        owner's request, and the owner may have lost the right to execute its function version
        meanwhile (left the organization, the package went private). Checked in the claim's
        transaction, on the facts the claim read (PostgreSQL), else in one statement per owner
        in the batch; a refused job is recorded failed with kind `permission_denied` there and
        then, and never runs."""
        refused = await self._refused(session, claimed)
        for job_id, row in list(claimed.items()):
            if job_id not in refused:
                continue
            error = {
                "kind": "permission_denied",
                "message": "the job's owner may no longer execute function version "
                f"{row.function_version_id!r}: its package is not visible to them now",
            }
            await repository.finish(
                Finish(job_id, Outcome("failed", None, error, ""), row.lease), now
            )
            claimed[job_id] = replace(row, refused=True)
        return claimed

    async def _refused(self, session: AsyncSession, claimed: dict[str, ClaimedRow]) -> set[str]:
        """The claimed jobs whose owner may no longer execute their function version."""
        by_owner: dict[str, set[str]] = {}
        for row in claimed.values():
            by_owner.setdefault(row.user_id, set()).add(row.function_version_id)
        refused: dict[str, frozenset[str]] = {}
        for owner, versions in by_owner.items():
            rows = [row for row in claimed.values() if row.user_id == owner]
            if all(row.facts_read for row in rows):
                facts = [row.facts for row in rows if row.facts is not None]
                refused[owner] = access_service.refused_by_facts(owner, versions, facts)
            else:
                refused[owner] = await access_service.refused_executions(session, owner, versions)
        return {
            job_id
            for job_id, row in claimed.items()
            if row.function_version_id in refused[row.user_id]
        }

    async def heartbeat(self, session: AsyncSession, leases: Collection[str]) -> int:
        """A worker process's sign of life for the jobs it runs (one statement)."""
        return await JobStoreRepository.from_session(session).heartbeat(list(leases), utcnow())

    async def release(self, session: AsyncSession, job_id: str, lease: str) -> bool:
        return await JobStoreRepository.from_session(session).release(job_id, lease)


def _ended_order(finishes: list[Finish]) -> list[str]:
    """The jobs of `finishes` in the order `transition_rows` gives their events."""
    return list({f.job_id: f for f in reversed(finishes)})


job_store_service = JobStoreService()
