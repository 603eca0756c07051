"""Writing a planned deployment of a package (spec: Versioning 4, 5, 8): the rows a
`plan_deployment` decision stands for, and the package history that decision reads. Called by
`publishing/service.py`, which checks the request, locks the package and plans."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.packages.canary.service import canary_service
from calcgraph.domain.packages.dependencies.service import dependency_service
from calcgraph.domain.packages.dependency_rules import Pin, pin_map
from calcgraph.domain.packages.deployment_plan import (
    DeploymentPlan,
    ExistingFunctionVersion,
    FunctionHistory,
    PackageHistory,
)
from calcgraph.domain.packages.deployments.service import deployment_service
from calcgraph.domain.packages.manifest import Manifest
from calcgraph.domain.packages.manifest_json import release_as_json
from calcgraph.domain.packages.models import Package, PackageVersion, PackageVersionFunction
from calcgraph.domain.packages.repository import PackageVersionRepository
from calcgraph.domain.packages.views import DeploymentReport, FunctionDeployment
from calcgraph.domain.read_models import attributes, from_attributes

_PLANNED = (
    "version",
    "handler",
    "inputs_schema",
    "outputs_schema",
    "typed",
    "changelog",
    "is_breaking_change",
    "deprecated",
    "deprecated_message",
    "removal_version",
    "resources",
)
"""What a new function version row takes from its `FunctionPlan`, under the same names."""


def package_history(
    versions: Sequence[PackageVersion],
    functions: Sequence[Function],
    function_versions: Sequence[FunctionVersion],
    pins: Mapping[str, Mapping[str, str]],
) -> PackageHistory:
    """What the package already has, as the deployment decision reads it (`versioning`)."""
    by_function: dict[str, dict[str, ExistingFunctionVersion]] = {}
    for v in function_versions:
        by_function.setdefault(v.function_id, {})[v.version] = from_attributes(
            ExistingFunctionVersion,
            v,
            checksum=v.code_checksum,
            dependencies=pins.get(v.package_version_id, {}),
        )
    history: dict[str, FunctionHistory] = {}
    for f in functions:
        stored = by_function.get(f.id, {})
        if stored and f.current_version is not None:
            history[f.name] = FunctionHistory(current=f.current_version, versions=stored)
    return PackageHistory(versions=[v.version for v in versions], functions=history)


async def write_deployment(
    session: AsyncSession,
    package: Package,
    manifest: Manifest,
    code: dict[str, bytes],
    plan: DeploymentPlan,
    history: PackageHistory,
    rows: Sequence[Function],
    git_ref: str | None,
    git_commit: str | None,
    pins: Sequence[Pin] = (),
) -> DeploymentReport:
    """Write what `plan` decided: the package version and its blobs, new function versions
    (an unchanged one is linked, not copied), current versions, the deployment record and a
    canary; the report of the plan with the ids written."""
    packages = PackageVersionRepository.from_session(session)
    blobs = {sha256_hex(data): data for data in code.values()}
    await packages.add_blobs(blobs)
    now = utcnow()
    version = PackageVersion(
        id=new_id(),
        package_id=package.id,
        version=plan.package_version,
        git_ref=git_ref,
        git_commit=git_commit,
        is_latest=plan.is_latest,
        is_stable=plan.is_stable,
        manifest=manifest.as_json(),
        files={path: sha256_hex(data) for path, data in sorted(code.items())},
        changelog=release_as_json(plan.changelog) if plan.changelog else None,
        created_at=now,
    )
    session.add(version)
    await session.flush()
    await dependency_service.store(session, version.id, pins)
    if plan.is_latest:
        await packages.clear_latest(package.id, keep_id=version.id)
    existing = {f.name: f for f in rows}
    lines: list[FunctionDeployment] = []
    for fp in plan.functions:
        function = existing.get(fp.name)
        if function is None:
            function = Function(id=new_id(), name=fp.name, package_id=package.id)
            session.add(function)
        past = history.functions.get(fp.name)
        stored = past.versions.get(fp.version) if past and fp.status == "unchanged" else None
        if stored is not None and stored.id is not None:
            version_id = stored.id
        else:
            version_id = new_id()
            session.add(
                FunctionVersion(
                    id=version_id,
                    function_id=function.id,
                    package_version_id=version.id,
                    code_checksum=fp.checksum,
                    created_at=now,
                    deployed_at=now,
                    **attributes(fp, *_PLANNED),
                )
            )
        session.add(
            PackageVersionFunction(
                package_version_id=version.id,
                function_version_id=version_id,
                status=fp.status,
                deployed_at=now,
            )
        )
        if fp.becomes_current:
            function.current_version = fp.version
            function.current_version_id = version_id
        lines.append(
            from_attributes(FunctionDeployment, fp, function_id=function.id, version_id=version_id)
        )
        # Parents before children: a function row must exist before its versions.
        await session.flush()
    package.updated_at = now
    await session.flush()
    await deployment_service.record_deployed(
        session,
        package,
        plan.package_version,
        manifest.package.deployment.strategy,
        current=plan.is_latest,
    )
    canary = manifest.package.deployment.canary
    if (
        manifest.package.deployment.strategy == "canary"
        and canary is not None
        and canary.enabled
        and history.versions
    ):
        hosted = await packages.versions_of(package.id)
        current = next((v.version for v in hosted if v.is_latest), None)
        await canary_service.start(session, package, canary, plan.package_version, current)
    return from_attributes(
        DeploymentReport,
        plan,
        package_id=package.id,
        package=package.name,
        package_version_id=version.id,
        git_ref=git_ref,
        git_commit=git_commit,
        functions=tuple(lines),
        breaking_changes=tuple(c.as_dict() for c in plan.breaking_changes),
        dependencies=pin_map(pins, direct_only=True),
        dependency_closure=pin_map(pins),
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
