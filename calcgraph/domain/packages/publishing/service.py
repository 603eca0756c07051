"""Publishing packages and reading their versions (spec: Versioning; contract 4).

A sub-feature of packages, beside `packages/service.py` (reading packages under the access
policy), to keep both modules small; both doors call `publishing_service`. The rows a planned
deployment writes: `writing/service.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access import policy
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import (
    Conflict,
    FieldError,
    ValidationError,
    found,
)
from calcgraph.domain.events.catalog import FILE_UPLOADED
from calcgraph.domain.events.service import record, upload_data
from calcgraph.domain.functions.repository import FunctionVersionRepository
from calcgraph.domain.packages.canary.service import canary_service
from calcgraph.domain.packages.checksums import function_checksums
from calcgraph.domain.packages.dependencies.service import dependency_service
from calcgraph.domain.packages.dependency_rules import pin_map
from calcgraph.domain.packages.files import clean_files
from calcgraph.domain.packages.manifest import MANIFEST_FILE, Manifest, parse_manifest
from calcgraph.domain.packages.models import Package
from calcgraph.domain.packages.publishing.sources import SourceFetcher
from calcgraph.domain.packages.publishing.writing.service import package_history, write_deployment
from calcgraph.domain.packages.repository import PackageRepository, PackageVersionRepository
from calcgraph.domain.packages.semver_rules import same_version, version_from_tag
from calcgraph.domain.packages.service import package_read_service
from calcgraph.domain.packages.versioning import (
    plan_deployment,
)
from calcgraph.domain.packages.views import (
    DeploymentReport,
    PackageVersionsView,
    PackageVersionView,
    PackageView,
)
from calcgraph.domain.read_models import grouped_by


class PublishingService:
    """Decisions where the specification and contract are silent:

    - A new package belongs to the caller; `organization` needs the caller to be a member of
      it (any role; its owners then manage the package too); `internal` needs an
      organization; visibility defaults to `private`.
    - Publishing to an existing package needs the right to manage it (owner, owners of the
      owning organization, admins). Its visibility and organization stay as they are unless
      the request names new ones.
    - Concurrent deployments of one package: the package row is locked (PostgreSQL) or the
      write is serialised (SQLite), and the unique constraints on (package, version) and
      (function, version) are the last word: a violation is 409, never two rows.
    - Every file sent (or every file of the git checkout) is stored content-addressed in
      `code_blobs`; the deployment keeps the path -> SHA-256 map.
    """

    async def publish(
        self,
        session: AsyncSession,
        principal: Principal,
        manifest: Manifest | Mapping[str, object] | str,
        files: Mapping[str, str | bytes],
        visibility: str | None = None,
        organization_slug: str | None = None,
        *,
        git_ref: str | None = None,
        git_commit: str | None = None,
        upload_event: bool = True,
    ) -> DeploymentReport:
        """Deploy a package version (spec: Versioning 4, 5, 8): the report of the plan,
        with the immutable ids of what it wrote. `upload_event`: record
        `calcgraph.file.uploaded` about the package (POST /functions records its own, about
        the function)."""
        parsed = manifest if isinstance(manifest, Manifest) else parse_manifest(manifest)
        code = clean_files(files)
        checksums = function_checksums(parsed, code)
        if visibility is not None:
            _check_visibility(visibility)
        organization = await access_service.organization_to_place_in(
            session, principal, organization_slug, "publish into it"
        )
        packages = PackageVersionRepository.from_session(session)
        functions = FunctionVersionRepository.from_session(session)
        _refuse_names_differing_in_case(parsed.functions, "in the manifest")
        other = await packages.name_in_other_case(parsed.package.name)
        if other is not None:
            raise Conflict(
                f"a package {other!r} exists: package names are unique without regard to case"
            )
        try:
            # Insert-if-missing, then lock: two first deployments of one package at once
            # both proceed (one creates the row, the other finds it) instead of one failing.
            created_id = new_id()
            await packages.insert_package_if_missing(
                id=created_id,
                name=parsed.package.name,
                owner_id=principal.user_id,
                organization_id=organization.id if organization else None,
                visibility=visibility or "private",
                description=parsed.package.description,
            )
            package = await packages.lock_package(parsed.package.name)
            if package is None:
                # Not inserted: a concurrent request created the name in another case first
                # (the database's unique index on lower(name), contract 8b).
                raise Conflict(
                    f"a package named {parsed.package.name!r} in another case was created by "
                    "a concurrent request: package names are unique without regard to case"
                )
            if package.id != created_id:
                await self._ensure_manager(session, principal, package)
                if visibility is not None:
                    package.visibility = visibility
                if organization is not None:
                    package.organization_id = organization.id
                if parsed.package.description is not None:
                    package.description = parsed.package.description
            if package.visibility == "internal" and package.organization_id is None:
                raise ValidationError(
                    "an internal package needs an organization",
                    [FieldError(("organization",), "required when visibility is internal")],
                )
            await canary_service.refuse_during_canary(session, package)
            rows = await functions.functions_of_package(package.id)
            _refuse_names_differing_in_case(
                {*parsed.functions, *(f.name for f in rows)}, f"in package {package.name!r}"
            )
            deployed = await packages.versions_of(package.id)
            history = package_history(
                deployed,
                rows,
                await functions.versions_of_functions([f.id for f in rows]),
                await dependency_service.pin_maps(session, [v.id for v in deployed]),
            )
            pins = await dependency_service.resolve(session, principal, parsed, code)
            plan = plan_deployment(parsed, checksums, history, pin_map(pins))
            report = await write_deployment(
                session, package, parsed, code, plan, history, rows, git_ref, git_commit, pins
            )
            if upload_event:
                await record(
                    session,
                    FILE_UPLOADED,
                    package.id,
                    upload_data("package", package.id, report.package_version, code, principal),
                    subject_kind="package",
                )
            return report
        except IntegrityError:
            raise Conflict(
                f"package {parsed.package.name!r} version {parsed.package.version} or one of its "
                "names (unique without regard to case) was written by a concurrent request; "
                "list its versions and functions and try again"
            ) from None

    async def publish_from_git(
        self,
        session: AsyncSession,
        principal: Principal,
        sources: SourceFetcher,
        git_url: str,
        ref: str,
        visibility: str | None = None,
        organization_slug: str | None = None,
    ) -> DeploymentReport:
        """Fetch `ref`, read `calcgraph.yaml` at the root, publish. The fetch runs before the
        first statement of the session, so no transaction (and no SQLite write lock) is held
        while git works."""
        checkout = await sources.fetch(git_url, ref)
        source = checkout.files.get(MANIFEST_FILE)
        if source is None:
            raise ValidationError(
                f"no {MANIFEST_FILE} at the root of the repository at {ref!r}",
                [FieldError(("ref",), f"{MANIFEST_FILE} is missing at the repository root")],
            )
        manifest = parse_manifest(source)
        tag = ref.removeprefix("refs/tags/")
        tagged = version_from_tag(tag) if checkout.ref_kind == "tag" else None
        if tagged is not None and not same_version(tagged, manifest.package.version):
            raise ValidationError(
                f"tag {tag!r} names version {tagged} but {MANIFEST_FILE} has package.version "
                f"{manifest.package.version}",
                [FieldError(("ref",), f"tag version {tagged} != {manifest.package.version}")],
            )
        return await self.publish(
            session,
            principal,
            manifest,
            checkout.files,
            visibility,
            organization_slug,
            git_ref=ref,
            git_commit=checkout.commit,
        )

    async def set_visibility(
        self, session: AsyncSession, principal: Principal, package_ref: str, visibility: str
    ) -> PackageView:
        """`PATCH /packages/{id}`: owner, owners of the owning organization, admins."""
        _check_visibility(visibility)
        package = found(
            await PackageVersionRepository.from_session(session).find_package(package_ref),
            f"package {package_ref!r}",
        )
        await self._ensure_manager(session, principal, package)
        if visibility == "internal" and package.organization_id is None:
            raise ValidationError(
                "an internal package needs an organization",
                [FieldError(("visibility",), "the package has no organization")],
            )
        package.visibility = visibility
        package.updated_at = utcnow()
        await session.flush()
        view = await PackageRepository.from_session(session).get_view(package.id)
        assert view is not None  # just written in this unit of work
        return view

    async def package_versions(
        self, session: AsyncSession, principal: Principal, package_ref: str
    ) -> PackageVersionsView:
        """Every deployment of a package (name or id), oldest first; 403 when hidden."""
        package, view = await package_read_service.find(session, principal, package_ref)
        versions = await PackageVersionRepository.from_session(session).version_views(package.id)
        return PackageVersionsView(package=view, versions=tuple(versions))

    async def visible_versions_by_package(
        self, session: AsyncSession, principal: Principal, package_ids: Sequence[str]
    ) -> dict[str, list[PackageVersionView]]:
        """Deployments of the visible packages among `package_ids` (for DataLoaders)."""
        visible = await PackageRepository.from_session(session).visible_ids(principal, package_ids)
        rows = await PackageVersionRepository.from_session(session).version_views_by_package(
            sorted(visible)
        )
        return grouped_by(package_ids, rows, lambda row: row.package_id)

    async def _ensure_manager(
        self, session: AsyncSession, principal: Principal, package: Package
    ) -> None:
        refusal = (
            f"package {package.name!r} for changes: its owner, the owners of its organization "
            "and admins manage it"
        )
        await access_service.require(session, principal, ("manage_package", refusal), on=package)


publishing_service = PublishingService()


def _refuse_names_differing_in_case(names: Iterable[str], where: str) -> None:
    """Function names are unique without regard to case (contract section 8b): `Inc` beside
    `inc` is a conflict, whether both are in the manifest or one was published before."""
    seen: dict[str, str] = {}
    for name in sorted(names):
        earlier = seen.setdefault(name.lower(), name)
        if earlier != name:
            raise Conflict(
                f"functions {earlier!r} and {name!r} {where} differ only in case: function "
                "names are unique without regard to case"
            )


def _check_visibility(visibility: str) -> None:
    if visibility not in policy.VISIBILITIES:
        raise ValidationError(
            "visibility is invalid",
            [FieldError(("visibility",), f"one of {', '.join(policy.VISIBILITIES)}")],
        )
