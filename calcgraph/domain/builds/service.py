"""`POST /functions`: build submitted code into a function version (spec: POST /functions).

Order of the specification: validate (422), build, scan (a CRITICAL finding refuses: 400 with
`vulnerabilities`), push, update the function record. The build runs in a worker thread before
the first statement of the session, so no transaction (and no SQLite write lock) is held while
pip and docker work; the unit of work then records the outcome in one short transaction.

A refused or failed build is recorded (status, reason, log) and the caller's previous function
version stays current: the service returns the refusal and the door raises it after the commit,
so the record survives the error response. A first submission that is refused still creates the
package and the function, without a version, so the record has a function to belong to.

The caller's right to the name (owner of the package, its organization's owners, admins) is
checked when the outcome is recorded, after the build: checking first would need a statement,
hence a transaction held open for the whole build.

How execution finds what a version runs from: `BuildRepository.for_function_version(id)`; its
`docker_image` is `docker:<image>` (the image to run; a worker pulls it from the configured
registry when it is not local) or `artifact:<sha256>`; `calcgraph.builds.artifact.runnable`
turns either into the sandbox's `image`, or `code_dir` and `deps_dir`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.builds.models import Build
from calcgraph.domain.builds.ports import BuildReport, BuildRequest, Builds
from calcgraph.domain.builds.repository import BuildRepository
from calcgraph.domain.builds.submission import (
    CODE_FILE,
    REQUIREMENTS_FILE,
    PreviousBuild,
    next_function_version,
    next_package_version,
    parse_requirements_text,
    requirements_text,
    submission_manifest,
)
from calcgraph.domain.builds.validation import SubmissionLimits, validate_submission
from calcgraph.domain.errors import (
    Conflict,
    DomainError,
    FieldError,
    InvalidRequest,
    NotFound,
    ValidationError,
)
from calcgraph.domain.events.catalog import BUILD_READY, BUILD_REFUSED, FILE_UPLOADED
from calcgraph.domain.events.service import record, upload_data
from calcgraph.domain.functions.models import Function
from calcgraph.domain.functions.repository import FunctionVersionRepository
from calcgraph.domain.functions.service import function_read_service
from calcgraph.domain.packages.checksums import function_checksums
from calcgraph.domain.packages.manifest import parse_manifest
from calcgraph.domain.packages.models import Package
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.domain.packages.repository import PackageVersionRepository


@dataclass(frozen=True)
class FunctionSubmission:
    name: str
    code: str
    requirements: tuple[str, ...] = ()
    handler: str = "main:main"
    inputs: Mapping[str, Any] | None = None
    outputs: Mapping[str, Any] | None = None
    visibility: str | None = None
    organization: str | None = None


@dataclass(frozen=True)
class BuildOutcome:
    """What a build answers. `refusal` is set when it was refused or failed: the door commits
    the record, then raises it."""

    build_id: str
    function_id: str
    status: str
    docker_image: str | None = None
    image_size_bytes: int | None = None
    build_seconds: float = 0.0
    vulnerabilities: dict[str, Any] = field(default_factory=dict)
    function_version_id: str | None = None
    version: str | None = None
    version_status: str | None = None
    package_version: str | None = None
    refusal: DomainError | None = None


class BuildService:
    async def submit(
        self,
        session: AsyncSession,
        principal: Principal,
        limits: SubmissionLimits,
        builds: Builds,
        submission: FunctionSubmission,
    ) -> BuildOutcome:
        validated = validate_submission(
            submission.code,
            submission.requirements,
            submission.handler,
            limits,
        )
        requirements = validated.requirement_lines
        files = {CODE_FILE: validated.source, REQUIREMENTS_FILE: requirements_text(requirements)}
        # Names, handler and typed ports are the manifest's rules: refuse before building.
        manifest = submission_manifest(
            submission.name, "1.0.0", "1.0.0", submission.handler,
            submission.inputs, submission.outputs,
        )  # fmt: skip
        checksum = function_checksums(parse_manifest(manifest), files)[submission.name]

        result = await builds.build(BuildRequest(submission.name, files, requirements))

        package = await self._own_package(session, principal, submission.name)
        build_id = new_id()
        key = await builds.store_log(build_id, result.log)
        if result.status != "success":
            return await self._refused(
                session, principal, submission, package, result, build_id, key
            )
        assert result.reference is not None
        previous = await self._previous(session, package, submission.name)
        version, version_status = next_function_version(previous, checksum, requirements)
        existing = (
            await PackageVersionRepository.from_session(session).versions_of(package.id)
            if package is not None
            else []
        )
        package_version = next_package_version([v.version for v in existing])
        report = await publishing_service.publish(
            session,
            principal,
            submission_manifest(
                submission.name, package_version, version, submission.handler,
                submission.inputs, submission.outputs,
            ),
            files,
            submission.visibility,
            submission.organization,
            upload_event=False,
        )  # fmt: skip
        deployed = report.functions[0]
        await record(
            session,
            FILE_UPLOADED,
            deployed.function_id,
            upload_data(
                "function",
                deployed.function_id,
                deployed.version,
                {path: content.encode() for path, content in files.items()},
                principal,
            ),
            subject_kind="function",
        )
        build = Build(
            id=build_id,
            function_id=deployed.function_id,
            function_version_id=deployed.version_id,
            build_status="success",
            docker_image=result.reference,
            image_size=result.size_bytes,
            build_duration=result.duration_seconds,
            log_key=key,
            vulnerabilities=result.vulnerabilities,
        )
        return await self._keep(
            session,
            build,
            "ready",
            version=deployed.version,
            version_status=deployed.status,
            package_version=report.package_version,
        )

    @staticmethod
    async def _keep(
        session: AsyncSession, build: Build, status: str, **answer: Any
    ) -> BuildOutcome:
        """Keep the record of a finished build; what the build answers is that record under
        the answer's names, with the door's `status` and the `answer` only it has."""
        build.finished_at = utcnow()
        await BuildRepository.from_session(session).add(build)
        await record(
            session,
            BUILD_READY if status == "ready" else BUILD_REFUSED,
            build.function_id,
            {
                "function": build.function_id,
                "build_id": build.id,
                "status": status,
                "reason": build.reason,
                "vulnerabilities": build.vulnerabilities or {},
            },
        )
        return BuildOutcome(
            build_id=build.id,
            function_id=build.function_id,
            status=status,
            docker_image=build.docker_image,
            image_size_bytes=build.image_size,
            build_seconds=build.build_duration or 0.0,
            vulnerabilities=build.vulnerabilities or {},
            function_version_id=build.function_version_id,
            **answer,
        )

    async def read_log(
        self,
        session: AsyncSession,
        principal: Principal,
        builds: Builds,
        function_id: str,
        build_id: str,
    ) -> str:
        """The log of one build, to whoever may see the function (403 otherwise)."""
        await function_read_service.get_function(session, principal, function_id)
        build = await BuildRepository.from_session(session).get(build_id)
        if build is None or build.function_id != function_id:
            raise NotFound(f"function {function_id!r} has no build {build_id!r}")
        text = await builds.read_log(build.log_key) if build.log_key else None
        if text is None:
            raise NotFound(f"the log of build {build_id!r} is no longer stored")
        return text

    async def _own_package(
        self, session: AsyncSession, principal: Principal, name: str
    ) -> Package | None:
        """The package the submission builds into, when it exists and the caller manages it."""
        package = await PackageVersionRepository.from_session(session).find_package(name)
        if package is None or package.name != name:
            return None
        refusal = f"function {name!r}: its package belongs to someone else"
        await access_service.require(session, principal, ("manage_package", refusal), on=package)
        others = [
            f.name
            for f in await FunctionVersionRepository.from_session(session).functions_of_package(
                package.id
            )
            if f.name != name
        ]
        if others:
            raise Conflict(
                f"package {name!r} holds other functions ({', '.join(sorted(others))}): it was "
                "published with a manifest; publish it through POST /packages"
            )
        return package

    async def _previous(
        self, session: AsyncSession, package: Package | None, name: str
    ) -> PreviousBuild | None:
        if package is None:
            return None
        functions = FunctionVersionRepository.from_session(session)
        function = await functions.function_named(package.id, name)
        if function is None or function.current_version_id is None:
            return None
        current = await functions.get(function.current_version_id)
        if current is None:
            return None
        files = await PackageVersionRepository.from_session(session).files_of(
            current.package_version_id
        )
        raw = files.get(REQUIREMENTS_FILE, b"")
        return PreviousBuild(
            current.version, current.code_checksum, parse_requirements_text(raw.decode())
        )

    async def _refused(
        self,
        session: AsyncSession,
        principal: Principal,
        submission: FunctionSubmission,
        package: Package | None,
        result: BuildReport,
        build_id: str,
        key: str,
    ) -> BuildOutcome:
        function_id = await self._function_for_record(session, principal, submission, package)
        vulnerabilities = result.vulnerabilities
        reason = result.reason or "the build failed"
        build = Build(
            id=build_id,
            function_id=function_id,
            build_status=result.status,
            build_duration=result.duration_seconds,
            log_key=key,
            reason=reason[:4000],
            vulnerabilities=vulnerabilities or None,
        )
        extra: dict[str, Any] = {"function_id": function_id, "build_id": build_id}
        if result.status == "refused":
            extra["vulnerabilities"] = vulnerabilities
        refusal = InvalidRequest(f"the build was {result.status}: {reason}", extra)
        return await self._keep(session, build, result.status, refusal=refusal)

    async def _function_for_record(
        self,
        session: AsyncSession,
        principal: Principal,
        submission: FunctionSubmission,
        package: Package | None,
    ) -> str:
        packages = PackageVersionRepository.from_session(session)
        functions = FunctionVersionRepository.from_session(session)
        if package is None:
            organization = await access_service.organization_to_place_in(
                session, principal, submission.organization
            )
            organization_id = organization.id if organization is not None else None
            if submission.visibility == "internal" and organization_id is None:
                raise ValidationError(
                    "an internal package needs an organization",
                    [FieldError(("body", "organization"), "required when visibility is internal")],
                )
            await packages.insert_package_if_missing(
                id=new_id(),
                name=submission.name,
                owner_id=principal.user_id,
                organization_id=organization_id,
                visibility=submission.visibility or "private",
                description=None,
            )
            package = await packages.lock_package(submission.name)
            assert package is not None  # inserted above or by a concurrent request
        function = await functions.function_named(package.id, submission.name)
        if function is None:
            function = Function(id=new_id(), name=submission.name, package_id=package.id)
            session.add(function)
            await session.flush()
        return function.id


build_service = BuildService()
