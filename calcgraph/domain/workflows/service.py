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
- A save is staged (issue 27: a 12,000-node save held a pooled connection 2.45 s, mostly type
  checking): the facts its validation needs (the caller's access, each reference's function
  version) are read in a short read session; the graph is validated holding no session (on a
  thread when it is large); then one write transaction checks again what may have changed
  meanwhile (the slug, the caller's rights, each resolved version still visible to the
  caller), locks the workflow's row (an update numbers its version there, as before) and
  writes. A resolved version gone from view meanwhile starts the save over; after
  `STAGE_ATTEMPTS` the save is validated inside its write transaction, as before staging.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import (
    Conflict,
    DomainError,
    FieldError,
    ValidationError,
    found,
)
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.listing.service import VisibleListing
from calcgraph.domain.quotas.limits import Quotas, check_nodes
from calcgraph.domain.spend import OFF_LOOP_NODES, off_loop
from calcgraph.domain.workflows.checking import Checked, Versions, checked, refuse
from calcgraph.domain.workflows.graph import Graph, parse_graph
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion
from calcgraph.domain.workflows.repository import WorkflowRepository, version_view
from calcgraph.domain.workflows.validation import Report
from calcgraph.domain.workflows.views import (
    WorkflowDetailView,
    WorkflowVersionView,
    WorkflowView,
)

T = TypeVar("T")
F = TypeVar("F")


DEFAULT_QUOTAS = Quotas()


class _Stale(Exception):
    """A fact the validation used changed before the write: the save starts over."""


STAGE_ATTEMPTS = 3
"""Reads, validation and write of one save at most this many times (`_Stale`)."""


def _large(document: object) -> bool:
    nodes = document.get("nodes") if isinstance(document, Mapping) else document
    return isinstance(nodes, list) and len(nodes) > OFF_LOOP_NODES


async def _pure(large: bool, function: Callable[..., T], *args: object) -> T:
    """`function(*args)` on a thread for a large graph (contract 8b: the event loop keeps
    answering the others), in place for a small one (a thread hop costs more than its work)."""
    return await off_loop(function, *args) if large else function(*args)


class WorkflowService:
    async def resolve(self, session: AsyncSession, principal: Principal, graph: Graph) -> Versions:
        """Resolve every function reference of `graph` once, under the caller's access."""
        versions: Versions = {}
        for ref in graph.function_refs():
            try:
                resolved = await function_version_service.resolve_reference(session, principal, ref)
                versions[ref] = resolved.version
            except (DomainError, ValueError):
                # Unknown, hidden, or a selector matching no version: all one to the author.
                versions[ref] = None
        return versions

    async def validate_graph(
        self, database: Database, principal: Principal, document: object
    ) -> Report:
        """`POST /workflows/validate`: the clean report, or 422 with the report. The
        references are read in a short session; the graph is validated holding none."""
        large = _large(document)
        graph = await _pure(large, parse_graph, document)
        async with database.read_session() as session:
            versions = await self.resolve(session, principal, graph)
        result = await _pure(large, checked, graph, versions)
        refuse(result.report, saving=False)
        return result.report

    async def create(
        self,
        database: Database,
        principal: Principal,
        *,
        slug: str,
        name: str,
        graph: Mapping[str, Any],
        visibility: str | None,
        organization_slug: str | None,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> WorkflowDetailView:
        """`POST /workflows`: the workflow with its version 1 (staged: see the module)."""
        check_nodes(graph, quotas)

        async def placing(session: AsyncSession, _write: bool) -> str | None:
            return await self._placing(session, principal, slug, visibility, organization_slug)

        async def insert(
            session: AsyncSession, organization_id: str | None, result: Checked
        ) -> WorkflowDetailView:
            return await self._insert(
                session, principal, slug, name, graph, visibility, organization_id, result
            )

        return await self._save(database, principal, graph, placing, insert)

    async def _save(
        self,
        database: Database,
        principal: Principal,
        graph: Mapping[str, Any],
        facts: Callable[[AsyncSession, bool], Awaitable[F]],
        write: Callable[[AsyncSession, F, Checked], Awaitable[WorkflowDetailView]],
    ) -> WorkflowDetailView:
        """A save, staged: `facts` (the refusals that come before the graph's, and what the
        write needs) and the references read in a read session, the graph validated holding
        none, then `facts` again (told it is the write) and `write` in one transaction."""
        large = _large(graph)
        parsed = await _pure(large, parse_graph, graph)
        for _ in range(STAGE_ATTEMPTS - 1):
            async with database.read_session() as session:
                await facts(session, False)
                versions = await self.resolve(session, principal, parsed)
            result = await _pure(large, checked, parsed, versions)
            refuse(result.report, saving=True)
            try:
                async with database.write_session() as session:
                    found = await facts(session, True)
                    await self._still_visible(session, principal, result)
                    return await write(session, found, result)
            except _Stale:
                continue
        # The references kept changing under the save: it is validated inside its write
        # transaction, against what that transaction reads, as every save was before staging.
        async with database.write_session() as session:
            found = await facts(session, True)
            versions = await self.resolve(session, principal, parsed)
            result = await _pure(large, checked, parsed, versions)
            refuse(result.report, saving=True)
            return await write(session, found, result)

    async def _placing(
        self,
        session: AsyncSession,
        principal: Principal,
        slug: str,
        visibility: str | None,
        organization_slug: str | None,
    ) -> str | None:
        """The refusals of a new workflow before its graph's (a taken slug, a place the caller
        may not use); the id of the organization it goes in, if any."""
        if await WorkflowRepository.from_session(session).by_slug(slug) is not None:
            raise Conflict(f"workflow slug {slug!r} is taken")
        organization = await access_service.organization_to_place_in(
            session, principal, organization_slug, "place workflows in it"
        )
        if (visibility or "private") == "internal" and organization is None:
            raise ValidationError(
                "an internal workflow needs an organization",
                [FieldError(("body", "organization"), "required when visibility is internal")],
            )
        return organization.id if organization is not None else None

    async def _insert(
        self,
        session: AsyncSession,
        principal: Principal,
        slug: str,
        name: str,
        graph: Mapping[str, Any],
        visibility: str | None,
        organization_id: str | None,
        result: Checked,
    ) -> WorkflowDetailView:
        """The rows of `create`."""
        repository = WorkflowRepository.from_session(session)
        workflow = Workflow(
            slug=slug,
            name=name,
            owner_id=principal.user_id,
            organization_id=organization_id,
            visibility=visibility or "private",
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
                resolved_functions=result.resolved,
            )
        )
        view = await repository.view_by_id(workflow.id)
        assert view is not None
        return WorkflowDetailView(view, version_view(version))

    async def update(
        self,
        database: Database,
        principal: Principal,
        slug: str,
        graph: Mapping[str, Any],
        *,
        quotas: Quotas = DEFAULT_QUOTAS,
    ) -> WorkflowDetailView:
        """`PUT /workflows/{slug}`: a new latest version (staged: see the module)."""
        check_nodes(graph, quotas)

        async def managed(session: AsyncSession, write: bool) -> Workflow:
            # The write locks the row: concurrent saves of one workflow take turns there.
            return await self._managed(session, principal, slug, for_update=write)

        async def add_version(
            session: AsyncSession, workflow: Workflow, result: Checked
        ) -> WorkflowDetailView:
            return await self._add_version(session, slug, workflow, graph, result)

        return await self._save(database, principal, graph, managed, add_version)

    async def _managed(
        self, session: AsyncSession, principal: Principal, slug: str, *, for_update: bool = False
    ) -> Workflow:
        """The workflow, if the caller may manage it (NotFound or PermissionDenied)."""
        repository = WorkflowRepository.from_session(session)
        workflow = found(
            await repository.by_slug(slug, for_update=for_update), f"workflow {slug!r}"
        )
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
        return workflow

    async def _add_version(
        self,
        session: AsyncSession,
        slug: str,
        workflow: Workflow,
        graph: Mapping[str, Any],
        result: Checked,
    ) -> WorkflowDetailView:
        """The rows of `update`: the version numbered from the locked row as it stands now."""
        repository = WorkflowRepository.from_session(session)
        number = workflow.latest_version + 1
        try:
            version = await repository.add_version(
                WorkflowVersion(
                    workflow_id=workflow.id,
                    version=number,
                    graph=dict(graph),
                    resolved_functions=result.resolved,
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

    async def _still_visible(
        self, session: AsyncSession, principal: Principal, result: Checked
    ) -> None:
        """`_Stale` unless every version the graph resolved to is still there for the caller
        (one statement): a version the validation used may not be frozen into the save once
        its package is hidden from the caller (or the caller left its organization)."""
        wanted = sorted(set(result.resolved.values()))
        if not wanted:
            return
        visible = await function_version_service.visible_versions_by_id(session, principal, wanted)
        if len(visible) != len(wanted):
            raise _Stale

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

    list_workflows = VisibleListing(WorkflowRepository.from_session)
    """`search`: a case-insensitive part of the slug or the name."""

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
