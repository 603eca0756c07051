"""Reading functions under the access policy: a function follows its package.
(Building and versioning functions belong to other issues.)"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import Conflict, NotFound, found
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.functions.repository import (
    FunctionRepository,
    FunctionVersionRepository,
    function_version_view,
)
from calcgraph.domain.functions.views import (
    FunctionDetailView,
    FunctionVersionsView,
    FunctionVersionView,
    FunctionView,
    ResolvedFunction,
)
from calcgraph.domain.listing.service import RepositoryRead, VisibleListing
from calcgraph.domain.packages.addressing import (
    ExecuteAddress,
    parse_function_ref,
    select_version,
)
from calcgraph.domain.packages.repository import PackageVersionRepository
from calcgraph.domain.packages.semver_rules import latest_version
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.read_models import from_attributes


class FunctionReadService:
    list_functions = VisibleListing(FunctionRepository.from_session)
    """`search`: a case-insensitive part of `package/name`."""

    async def get_function(
        self, session: AsyncSession, principal: Principal, function_id: str
    ) -> FunctionView:
        function = found(
            await FunctionRepository.from_session(session).get_view(function_id),
            f"function {function_id!r}",
        )
        await package_read_service.ensure_visible(session, principal, function.package_id)
        return function

    visible_by_package = RepositoryRead(
        FunctionRepository.from_session, FunctionRepository.visible_by_package
    )
    """`(session, principal, package_ids)`: the visible functions of each package."""

    async def visible_functions(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, FunctionView]:
        views = await FunctionRepository.from_session(session).get_views(ids)
        visible = await package_read_service.visible_packages(
            session, principal, sorted({v.package_id for v in views})
        )
        return {v.id: v for v in views if v.package_id in visible}


function_read_service = FunctionReadService()


class FunctionVersionService:
    """Addressing and version listings of functions (spec: Versioned calls and version
    listings). Decisions where the specification is silent:

    - `/functions/{function_id}/execute` takes either identifier: a function *version* id
      (immutable, the `version_id` and `endpoint` of a deployment report) executes exactly
      that version; a function id executes the function's current version.
    - `{package}` in a path is a package name or a package id.
    - A function name alone is ambiguous across packages: `?package=` picks one; without it
      the name must match exactly one visible package's function, else 409 naming them.
    - A hidden package is 403 `PermissionDenied` (spec: Errors); unknown names, versions and
      ids are 404 `NotFound` naming what exists.
    """

    async def resolve_function_version(
        self, session: AsyncSession, principal: Principal, address: ExecuteAddress
    ) -> ResolvedFunction:
        """Exactly one function version, from an id, or a package and function name with
        optional selectors (`None`/`latest`/exact) for the package or function version."""
        if address.function_id is not None:
            return await self._by_id(session, principal, address.function_id)
        package, function = address.package, address.function
        if package is None or function is None:
            raise NotFound("name a function id, or a package and a function")
        package_version, version = address.package_selector, address.function_selector
        if package_version is None and version in (None, "latest"):
            fast = await self._current(session, principal, package, function)
            if fast is not None:
                return fast
        _, view = await package_read_service.find(session, principal, package)
        repository = FunctionVersionRepository.from_session(session)
        if package_version is not None:
            return await self._in_deployment(
                session, principal, view.id, view.name, package_version, function, version
            )
        row = await repository.function_named(view.id, function)
        if row is None:
            names = [f.name for f in await repository.functions_of_package(view.id)]
            raise NotFound(
                f"package {view.name!r} has no function {function!r}; functions: "
                f"{', '.join(names) or 'none'}",
                {"functions": names},
            )
        versions = await repository.versions_of_functions([row.id])
        chosen = select_version(
            [v.version for v in versions],
            version,
            subject=f"function {view.name}/{function}",
            current=row.current_version,
        )
        found = next(v for v in versions if v.version == chosen)
        return await self._resolved(session, principal, row, found)

    async def resolve_reference(
        self, session: AsyncSession, principal: Principal, reference: str
    ) -> ResolvedFunction:
        """A workflow node's `function` (contract 5): `package/function[@v]` or an id."""
        ref = parse_function_ref(reference)
        address = (
            ExecuteAddress.by_function_id(reference)
            if ref is None
            else ExecuteAddress(
                package=ref.package, function=ref.function, function_selector=ref.selector
            )
        )
        return await self.resolve_function_version(session, principal, address)

    async def code_files(self, session: AsyncSession, function_version_id: str) -> dict[str, bytes]:
        """The files a function version runs from, `{path: content}` (no access check: the
        caller resolved the version under the policy first)."""
        row = found(
            await FunctionVersionRepository.from_session(session).get(function_version_id),
            f"function version {function_version_id!r}",
        )
        return await PackageVersionRepository.from_session(session).files_of(row.package_version_id)

    async def function_versions(
        self,
        session: AsyncSession,
        principal: Principal,
        function: str,
        package: str | None = None,
    ) -> FunctionVersionsView:
        """`GET /functions/{function_name}/versions`: one line per deployment that carried
        the function, oldest first."""
        repository = FunctionVersionRepository.from_session(session)
        if package is not None:
            _, view = await package_read_service.find(session, principal, package)
            row = await repository.function_named(view.id, function)
            if row is None:
                raise NotFound(f"package {view.name!r} has no function {function!r}")
            target = await function_read_service.get_function(session, principal, row.id)
        else:
            target = await self._by_name(session, principal, function)
        entries = await repository.deployments_of(target.id)
        return FunctionVersionsView(function=target, versions=tuple(entries))

    async def function_detail(
        self, session: AsyncSession, principal: Principal, function_id: str
    ) -> FunctionDetailView:
        view = await function_read_service.get_function(session, principal, function_id)
        current = (
            await FunctionVersionRepository.from_session(session).get(view.current_version_id)
            if view.current_version_id is not None
            else None
        )
        return FunctionDetailView(
            function=view,
            current=function_version_view(current) if current is not None else None,
        )

    async def visible_versions_by_id(
        self, session: AsyncSession, principal: Principal, ids: Sequence[str]
    ) -> dict[str, FunctionVersionView]:
        rows = await FunctionVersionRepository.from_session(session).visible_views_by_id(
            principal, ids
        )
        return {v.id: v for v in rows}

    visible_versions_by_function = RepositoryRead(
        FunctionVersionRepository.from_session, FunctionVersionRepository.visible_views_by_function
    )
    """`(session, principal, function_ids)`: the visible versions of each function."""

    async def _by_name(
        self, session: AsyncSession, principal: Principal, name: str
    ) -> FunctionView:
        repository = FunctionVersionRepository.from_session(session)
        candidates = await repository.visible_named(principal, name)
        if not candidates:
            # An id is accepted too, for clients that hold one.
            by_id = await FunctionRepository.from_session(session).get_view(name)
            if by_id is not None:
                return await function_read_service.get_function(session, principal, by_id.id)
            raise NotFound(f"no function {name!r} in a package you can see")
        if len(candidates) > 1:
            qualified = [f"{c.package}/{c.name}" for c in candidates]
            raise Conflict(
                f"function name {name!r} is ambiguous: {', '.join(qualified)}; "
                "add ?package=<package name>",
                {"candidates": qualified},
            )
        return candidates[0]

    async def _current(
        self, session: AsyncSession, principal: Principal, package: str, function: str
    ) -> ResolvedFunction | None:
        """The common call (`package/function`, or `@latest`): one joined statement, then the
        access policy; it is on every execute, so it is kept to that. None: let the general
        path find what is missing and say so."""
        found = await FunctionVersionRepository.from_session(session).current_of_named(
            package, function
        )
        if found is None:
            return None
        row, fn, current = found
        await access_service.visible(session, principal, row, "package", package)
        view = from_attributes(FunctionView, fn, package=row.name)
        return ResolvedFunction(function=view, version=function_version_view(current))

    async def _by_id(
        self, session: AsyncSession, principal: Principal, identifier: str
    ) -> ResolvedFunction:
        repository = FunctionVersionRepository.from_session(session)
        pinned = await repository.get(identifier)
        if pinned is not None:
            function = await session.get(Function, pinned.function_id)
            assert function is not None  # foreign key
            return await self._resolved(session, principal, function, pinned)
        function = found(
            await session.get(Function, identifier), f"function or function version {identifier!r}"
        )
        current = (
            await repository.get(function.current_version_id)
            if function.current_version_id
            else None
        )
        if current is None:
            raise NotFound(f"function {identifier!r} has no deployed version")
        return await self._resolved(session, principal, function, current)

    async def _in_deployment(
        self,
        session: AsyncSession,
        principal: Principal,
        package_id: str,
        package_name: str,
        selector: str,
        function: str,
        version: str | None,
    ) -> ResolvedFunction:
        deployments = await PackageVersionRepository.from_session(session).versions_of(package_id)
        latest = next((d.version for d in deployments if d.is_latest), None)
        chosen = select_version(
            [d.version for d in deployments],
            selector,
            subject=f"package {package_name!r}",
            current=latest or latest_version(d.version for d in deployments),
        )
        deployment = next(d for d in deployments if d.version == chosen)
        carried = await FunctionVersionRepository.from_session(session).in_deployment(deployment.id)
        found = next((v for name, v in carried if name == function), None)
        if found is None:
            names = [name for name, _ in carried]
            raise NotFound(
                f"package {package_name!r} version {chosen} has no function {function!r}; "
                f"functions: {', '.join(names) or 'none'}",
                {"functions": names},
            )
        if version is not None:
            # `package@v/function@w`: w must be the version that deployment carries.
            select_version(
                [found.version],
                version,
                subject=f"function {package_name}@{chosen}/{function}",
                current=found.version,
            )
        row = await session.get(Function, found.function_id)
        assert row is not None  # foreign key
        return await self._resolved(session, principal, row, found)

    async def _resolved(
        self,
        session: AsyncSession,
        principal: Principal,
        function: Function,
        version: FunctionVersion,
    ) -> ResolvedFunction:
        view = await function_read_service.get_function(session, principal, function.id)
        return ResolvedFunction(function=view, version=function_version_view(version))


function_version_service = FunctionVersionService()
