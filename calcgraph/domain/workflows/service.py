"""Workflows and their immutable versions: validate, save, read, list.

Decisions where the specification and contract are silent:
- Function references are resolved under the saving caller's access: a reference to a
  function the caller cannot see is reported as `unknown_functions`, exactly like one that
  does not exist, so the report never reveals hidden packages.
- Each node's reference is frozen into the version's `resolved_functions` (node key to
  function version id); `@latest` and bare references pin the version current at save time.
- A new workflow belongs to the caller; `organization` needs membership, `internal` needs an
  organization, visibility defaults to `private` (the package rules). A new version can be
  saved by the owner, owners of the owning organization and admins.
- `POST /workflows/validate` answers 422 for every invalid graph; saving answers 400
  `InvalidRequest` when a node names an untyped function, else 422 (contract 2).
- Concurrent saves of one workflow are serialised by locking its row (PostgreSQL) or by the
  write lock (SQLite); the unique (workflow, version) key backs that up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import (
    Conflict,
    DomainError,
    FieldError,
    InvalidRequest,
    NotFound,
    ValidationError,
)
from calcgraph.domain.functions.deprecation import deprecation_of
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import FunctionVersionView
from calcgraph.domain.listing.filters import parse_search
from calcgraph.domain.listing.paging import Page, PageRequest
from calcgraph.domain.quotas.limits import Quotas, check_nodes
from calcgraph.domain.types.expr import TypeExprError
from calcgraph.domain.workflows.graph import Graph, parse_graph
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion
from calcgraph.domain.workflows.repository import WorkflowRepository, version_view
from calcgraph.domain.workflows.validation import FunctionSignature, Report, validate
from calcgraph.domain.workflows.views import (
    WorkflowDetailView,
    WorkflowVersionView,
    WorkflowView,
)

INVALID_GRAPH = "workflow graph is invalid"


@dataclass(frozen=True)
class Checked:
    """A graph with its report and, per function node, the function version it resolved to."""

    graph: Graph
    report: Report
    resolved: dict[str, str]


def report_errors(report: Report) -> list[FieldError]:
    """The report as the contract's located `errors` list of a 422 body."""
    return [
        FieldError(
            ("body", "graph", problem.category)
            + ((problem.node_key,) if problem.node_key is not None else ())
            + ((problem.port,) if problem.port is not None else ()),
            problem.reason,
        )
        for problem in report.problems
    ]


def refuse(report: Report, *, saving: bool) -> None:
    """Raise the contract's refusal for an invalid report (400 for untyped functions when
    saving, 422 otherwise); return when the report is clean."""
    if report.valid:
        return
    body = {"report": report.as_dict()}
    if saving and report.has_untyped_functions:
        raise InvalidRequest(
            "workflow graph references functions without typed I/O; only typed functions "
            "can be workflow nodes",
            body,
        )
    raise ValidationError(INVALID_GRAPH, report_errors(report), body)


DEFAULT_QUOTAS = Quotas()


class WorkflowService:
    async def check(self, session: AsyncSession, principal: Principal, document: object) -> Checked:
        """Parse, resolve every function reference once, validate."""
        graph = parse_graph(document)
        versions: dict[str, FunctionVersionView | None] = {}
        for ref in graph.function_refs():
            try:
                resolved = await function_version_service.resolve_reference(session, principal, ref)
                versions[ref] = resolved.version
            except (DomainError, ValueError):
                # Unknown, hidden, or a selector matching no version: all one to the author.
                versions[ref] = None
        signatures: dict[str, FunctionSignature | None] = {}
        for ref, version in versions.items():
            if version is None:
                signatures[ref] = None
                continue
            try:
                deprecation = deprecation_of(ref, version)
                signatures[ref] = FunctionSignature.from_schemas(
                    version.inputs_schema,
                    version.outputs_schema,
                    typed=version.typed,
                    deprecation=deprecation.warning if deprecation is not None else None,
                )
            except TypeExprError:
                signatures[ref] = None
        report = validate(graph, signatures)
        resolved_ids = {
            node.node_key: version.id
            for node in graph.function_nodes()
            if (version := versions.get(node.function)) is not None
        }
        return Checked(graph, report, resolved_ids)

    async def validate_graph(
        self, session: AsyncSession, principal: Principal, document: object
    ) -> Report:
        """`POST /workflows/validate`: the clean report, or 422 with the report."""
        checked = await self.check(session, principal, document)
        refuse(checked.report, saving=False)
        return checked.report

    async def create(
        self,
        session: AsyncSession,
        principal: Principal,
        *,
        slug: str,
        name: str,
        graph: Mapping[str, Any],
        visibility: str | None,
        organization_slug: str | None,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> WorkflowDetailView:
        check_nodes(graph, quotas)
        repository = WorkflowRepository.from_session(session)
        if await repository.by_slug(slug) is not None:
            raise Conflict(f"workflow slug {slug!r} is taken")
        organization = await access_service.organization_to_place_in(
            session, principal, organization_slug, "place workflows in it"
        )
        visibility = visibility or "private"
        if visibility == "internal" and organization is None:
            raise ValidationError(
                "an internal workflow needs an organization",
                [FieldError(("body", "organization"), "required when visibility is internal")],
            )
        checked = await self.check(session, principal, graph)
        refuse(checked.report, saving=True)
        workflow = Workflow(
            slug=slug,
            name=name,
            owner_id=principal.user_id,
            organization_id=organization.id if organization is not None else None,
            visibility=visibility,
            latest_version=1,
        )
        try:
            await repository.add(workflow)
        except IntegrityError:
            # Another request took the slug between the check above and this insert.
            raise Conflict(f"workflow slug {slug!r} is taken") from None
        version = await repository.add_version(
            WorkflowVersion(
                workflow_id=workflow.id,
                version=1,
                graph=dict(graph),
                resolved_functions=checked.resolved,
            )
        )
        view = await repository.view_by_id(workflow.id)
        assert view is not None
        return WorkflowDetailView(view, version_view(version))

    async def update(
        self,
        session: AsyncSession,
        principal: Principal,
        slug: str,
        graph: Mapping[str, Any],
        *,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> WorkflowDetailView:
        """`PUT /workflows/{slug}`: a new latest version."""
        check_nodes(graph, quotas)
        repository = WorkflowRepository.from_session(session)
        workflow = await repository.by_slug(slug, for_update=True)
        if workflow is None:
            raise NotFound(f"no workflow {slug!r}")
        await access_service.require(
            session,
            principal,
            ("see_workflow", f"workflow {slug!r}"),
            (
                "manage_workflow",
                f"workflow {slug!r} for changes: its owner, the owners of its organization and "
                "admins manage it",
            ),
            on=workflow,
        )
        checked = await self.check(session, principal, graph)
        refuse(checked.report, saving=True)
        number = workflow.latest_version + 1
        try:
            version = await repository.add_version(
                WorkflowVersion(
                    workflow_id=workflow.id,
                    version=number,
                    graph=dict(graph),
                    resolved_functions=checked.resolved,
                )
            )
        except IntegrityError:  # only without the row lock (never expected): say so plainly
            raise Conflict(
                f"workflow {slug!r} version {number} was saved by a concurrent request; retry"
            ) from None
        workflow.latest_version = number
        workflow.updated_at = utcnow()
        await session.flush()
        view = await repository.view_by_id(workflow.id)
        assert view is not None
        return WorkflowDetailView(view, version_view(version))

    async def get(
        self, session: AsyncSession, principal: Principal, slug: str
    ) -> WorkflowDetailView:
        view = await self.visible(session, principal, slug)
        version = await WorkflowRepository.from_session(session).version(
            view.id, view.latest_version
        )
        assert version is not None  # every workflow is saved with its first version
        return WorkflowDetailView(view, version_view(version))

    async def visible(self, session: AsyncSession, principal: Principal, slug: str) -> WorkflowView:
        """The workflow, NotFound, or PermissionDenied when it is hidden from the caller."""
        view = await WorkflowRepository.from_session(session).view_by_slug(slug)
        return await access_service.visible(session, principal, view, "workflow", slug)

    async def list_workflows(
        self,
        session: AsyncSession,
        principal: Principal,
        page: PageRequest,
        *,
        search: str | None = None,
    ) -> Page[WorkflowView]:
        """`search`: a case-insensitive part of the slug or the name."""
        return await WorkflowRepository.from_session(session).list_visible(
            principal, page, parse_search(search, "search")
        )

    async def visible_by_id(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, WorkflowView]:
        """The workflows among `ids` the caller may see, by id (GraphQL loaders: a run's)."""
        rows = await WorkflowRepository.from_session(session).visible_views(principal, ids)
        return {row.id: row for row in rows}

    async def versions_by_id(
        self, session: AsyncSession, ids: list[str]
    ) -> dict[str, WorkflowVersionView]:
        """For loaders under a run the caller may already see (no further access check)."""
        rows = await WorkflowRepository.from_session(session).versions_by_id(ids)
        return {row.id: row for row in rows}

    async def latest_versions(
        self, session: AsyncSession, workflow_ids: list[str]
    ) -> dict[str, WorkflowVersionView]:
        """Latest version of each workflow the caller already read (loaders)."""
        rows = await WorkflowRepository.from_session(session).latest_versions(workflow_ids)
        return {row.workflow_id: row for row in rows}


workflow_service = WorkflowService()
