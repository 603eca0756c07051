"""All SQL of workflows and workflow versions, with the visibility rule as a WHERE clause."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, or_, select

from calcgraph.db.dialect import locked
from calcgraph.domain.access.models import Organization, User
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.repository import visible_clause_on
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.listing.repository import ViewRepository, name_contains
from calcgraph.domain.read_models import from_attributes
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion
from calcgraph.domain.workflows.views import WorkflowVersionView, WorkflowView


def visible_workflow_clause(principal: Principal) -> ColumnElement[bool]:
    """`policy.can_see_workflow` as SQL (the package rule on workflow columns)."""
    return visible_clause_on(
        principal, Workflow.owner_id, Workflow.visibility, Workflow.organization_id
    )


def version_view(row: WorkflowVersion) -> WorkflowVersionView:
    return from_attributes(
        WorkflowVersionView, row, resolved_functions=dict(row.resolved_functions or {})
    )


class WorkflowRepository(ViewRepository[Workflow, WorkflowView]):
    model = Workflow

    def _views(self) -> Select[Workflow, str, str]:
        return (
            select(Workflow, User.username, Organization.slug)
            .join(User, User.id == Workflow.owner_id)
            .outerjoin(Organization, Organization.id == Workflow.organization_id)
        )

    @staticmethod
    def _view(row: Any) -> WorkflowView:
        workflow, owner, org_slug = row
        return from_attributes(WorkflowView, workflow, owner=owner, organization=org_slug)

    async def by_slug(self, slug: str, *, for_update: bool = False) -> Workflow | None:
        query = select(Workflow).where(Workflow.slug == slug)
        if for_update:
            query = locked(self.session.get_bind().dialect.name, query)
        return await self.session.scalar(query)

    async def view_by_slug(self, slug: str) -> WorkflowView | None:
        return await self._first_view(Workflow.slug == slug)

    async def view_by_id(self, workflow_id: str) -> WorkflowView | None:
        return await self._first_view(Workflow.id == workflow_id)

    async def list_visible(
        self, principal: Principal, page: PageRequest, search: str | None = None
    ) -> Page[WorkflowView]:
        """`search`: in the slug or the name."""
        where = and_(
            visible_workflow_clause(principal),
            or_(name_contains(Workflow.slug, search), name_contains(Workflow.name, search)),
        )
        return await self._views_page(where, Workflow.created_at, Workflow.id, page)

    async def visible_views(self, principal: Principal, ids: Sequence[str]) -> list[WorkflowView]:
        return await self._views_in(Workflow.id, ids, visible_workflow_clause(principal))

    async def visible_ids(self, principal: Principal, ids: Sequence[str]) -> set[str]:
        return await self._ids_in(Workflow.id, ids, visible_workflow_clause(principal))

    async def add_version(self, version: WorkflowVersion) -> WorkflowVersion:
        self.session.add(version)
        await self.session.flush()
        return version

    async def version(self, workflow_id: str, number: int) -> WorkflowVersion | None:
        return await self.session.scalar(
            select(WorkflowVersion).where(
                WorkflowVersion.workflow_id == workflow_id, WorkflowVersion.version == number
            )
        )

    async def versions_by_id(self, ids: Sequence[str]) -> list[WorkflowVersionView]:
        if not ids:
            return []
        rows = await self.session.scalars(
            select(WorkflowVersion).where(WorkflowVersion.id.in_(ids))
        )
        return [version_view(row) for row in rows]

    async def latest_versions(self, workflow_ids: Sequence[str]) -> list[WorkflowVersionView]:
        if not workflow_ids:
            return []
        rows = await self.session.scalars(
            select(WorkflowVersion)
            .join(
                Workflow,
                and_(
                    Workflow.id == WorkflowVersion.workflow_id,
                    Workflow.latest_version == WorkflowVersion.version,
                ),
            )
            .where(Workflow.id.in_(workflow_ids))
        )
        return [version_view(row) for row in rows]
