"""All SQL of quotas: what each user holds now, counted by the database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select

from calcgraph.db.base import RepositoryBase
from calcgraph.db.dialect import disk_bytes, json_list_length
from calcgraph.domain.access.models import User
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.quotas.views import UsageView
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.state import RUN_TERMINAL
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion


class QuotaRepository(RepositoryBase[User]):
    model = User

    def _job_bytes(self) -> Any:
        dialect = self.session.get_bind().dialect.name
        return (
            disk_bytes(dialect, Job.inputs)
            + disk_bytes(dialect, Job.outputs)
            + disk_bytes(dialect, Job.logs)
        )

    async def unfinished_runs(self, user_id: str) -> int:
        query = select(func.count()).where(
            WorkflowRun.user_id == user_id, WorkflowRun.status.not_in(RUN_TERMINAL)
        )
        return int(await self.session.scalar(query) or 0)

    async def queued_jobs(self, user_id: str) -> int:
        query = select(func.count()).where(Job.user_id == user_id, Job.status == "queued")
        return int(await self.session.scalar(query) or 0)

    async def stored(self, user_id: str) -> int:
        query = select(func.coalesce(func.sum(self._job_bytes()), 0)).where(Job.user_id == user_id)
        return int(await self.session.scalar(query) or 0)

    async def usage(self) -> list[UsageView]:
        """Every user that holds anything, with what they hold (admins' view)."""
        runs = dict(
            (
                await self.session.execute(
                    select(WorkflowRun.user_id, func.count())
                    .where(WorkflowRun.status.not_in(RUN_TERMINAL))
                    .group_by(WorkflowRun.user_id)
                )
            ).all()
        )
        jobs = (
            await self.session.execute(
                select(
                    Job.user_id,
                    func.count(),
                    func.sum(case((Job.status == "queued", 1), else_=0)),
                    func.coalesce(func.sum(self._job_bytes()), 0),
                ).group_by(Job.user_id)
            )
        ).all()
        by_user = {user_id: (count, queued, size) for user_id, count, queued, size in jobs}
        dialect = self.session.get_bind().dialect.name
        nodes: dict[str, int | None] = dict(
            (
                await self.session.execute(
                    select(
                        Workflow.owner_id,
                        func.max(json_list_length(dialect, WorkflowVersion.graph, "nodes")),
                    )
                    .join(WorkflowVersion, WorkflowVersion.workflow_id == Workflow.id)
                    .group_by(Workflow.owner_id)
                )
            ).all()
        )
        ids = set(runs) | set(by_user) | set(nodes)
        if not ids:
            return []
        found = await self.session.execute(select(User.id, User.username).where(User.id.in_(ids)))
        names: dict[str, str] = {user_id: name for user_id, name in found.all()}
        views = [
            UsageView(
                user_id=user_id,
                username=names.get(user_id, user_id),
                unfinished_runs=int(runs.get(user_id, 0)),
                jobs=int(by_user.get(user_id, (0, 0, 0))[0]),
                queued_jobs=int(by_user.get(user_id, (0, 0, 0))[1] or 0),
                stored_bytes=int(by_user.get(user_id, (0, 0, 0))[2] or 0),
                largest_workflow_nodes=int(nodes.get(user_id) or 0),
            )
            for user_id in ids
        ]
        return sorted(views, key=lambda v: (-v.stored_bytes, v.username))
