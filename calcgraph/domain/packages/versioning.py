"""The deployment decision (spec: Versioning 4, 5, 8) and version addressing, as pure functions
(what it reads and decides: `deployment_plan.py`).

Decisions where the specification is silent:

- A FunctionVersion is immutable, so besides the code checksum, its stored record (handler,
  typed I/O schemas, deprecation fields) must also be equal for a function to stay
  `unchanged`. Under `auto` any such difference bumps PATCH like a code change; under
  `manual` an existing version with a different record is refused like a changed checksum.
- `auto`: the PATCH bump starts from the highest existing version of the function, so it never
  collides with a version deployed earlier (e.g. from a maintenance branch). A `version`
  written for an auto function is not used; the plan warns when it differs.
- `manual`: a function without its own `version` takes the package version. A version lower
  than the current one is allowed (a maintenance release) and reported as a warning.
- Latest package version: the highest semver precedence among stable versions; only while no
  stable version exists does the highest pre-release count. A function's current version
  follows the latest package version.
- A function is a breaking change when the package changelog entry of the deployed version has
  a `breaking` change naming it (or naming no function: package wide), when its MAJOR number
  grows, or when its typed interface breaks callers by the type rules (`interface_diff`).
- Contract 11 (`lifecycle_rules`): a removal version reached refuses the deployment; interface
  breaks under `manual` need a MAJOR bump.
- A package version equal in precedence to an existing one (`1.0.0+b2` after `1.0.0+b1`)
  already exists: 409.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from calcgraph.domain.errors import Conflict
from calcgraph.domain.packages.canary_rules import check_split
from calcgraph.domain.packages.deployment_plan import (
    DeploymentPlan,
    ExistingFunctionVersion,
    FunctionHistory,
    FunctionPlan,
    PackageHistory,
    Status,
)
from calcgraph.domain.packages.interface_diff import InterfaceChange, breaking, function_changes
from calcgraph.domain.packages.lifecycle_rules import (
    breaking_changes,
    check_removals,
)
from calcgraph.domain.packages.manifest import FunctionSpec, Manifest
from calcgraph.domain.packages.manifest_package import Release
from calcgraph.domain.packages.semver_rules import (
    Version,
    is_stable,
    latest_version,
    parse_version,
    same_version,
    sort_versions,
)


def _record_differences(
    spec: FunctionSpec, old: ExistingFunctionVersion, pins: Mapping[str, str]
) -> list[str]:
    new = {
        "handler": spec.handler,
        "inputs": spec.inputs_schema(),
        "outputs": spec.outputs_schema(),
        "deprecated": spec.deprecated,
        "deprecated_message": spec.deprecated_message,
        "removal_version": spec.removal_version,
        "resources": dict(spec.resources) if spec.resources is not None else None,
        "dependencies": dict(pins),
    }
    stored = {
        "handler": old.handler,
        "inputs": dict(old.inputs_schema) if old.inputs_schema is not None else None,
        "outputs": dict(old.outputs_schema) if old.outputs_schema is not None else None,
        "deprecated": old.deprecated,
        "deprecated_message": old.deprecated_message,
        "removal_version": old.removal_version,
        "resources": dict(old.resources) if old.resources is not None else None,
        "dependencies": dict(old.dependencies),
    }
    return [key for key in new if new[key] != stored[key]]


def _interface_changes(spec: FunctionSpec, old: ExistingFunctionVersion) -> list[InterfaceChange]:
    """How the typed interface moved from the stored version (contract 11: the type rules)."""
    return function_changes(
        spec.name,
        (old.inputs_schema, old.outputs_schema),
        (spec.inputs_schema(), spec.outputs_schema()),
    )


def _changelog_entries(release: Release | None, name: str) -> list[tuple[str, str]]:
    """(type, description) of the changes of a release that concern a function."""
    if release is None:
        return []
    return [
        (c.type, c.description) for c in release.changes if not c.functions or name in c.functions
    ]


def _find(history: FunctionHistory, version: str) -> ExistingFunctionVersion | None:
    if version in history.versions:
        return history.versions[version]
    return next((v for k, v in history.versions.items() if same_version(k, version)), None)


def _highest(history: FunctionHistory) -> Version:
    return max([parse_version(v) for v in history.versions] + [parse_version(history.current)])


@dataclass
class _Decision:
    version: str
    status: Status
    previous: ExistingFunctionVersion | None


def _decide_auto(
    spec: FunctionSpec,
    checksum: str,
    package_version: str,
    history: FunctionHistory | None,
    warnings: list[str],
    pins: Mapping[str, str],
) -> _Decision:
    if history is None:
        return _Decision(package_version, "new", None)
    current = _find(history, history.current)
    if current is not None and current.checksum == checksum:
        changed = _record_differences(spec, current, pins)
        if not changed:
            decision = _Decision(current.version, "unchanged", current)
            _warn_declared(spec, decision.version, warnings)
            return decision
        warnings.append(
            f"function {spec.name!r}: code unchanged but {', '.join(changed)} changed; "
            "a function version is immutable, so the PATCH number is bumped"
        )
    decision = _Decision(str(_highest(history).bump_patch()), "updated", current)
    _warn_declared(spec, decision.version, warnings)
    return decision


def _warn_declared(spec: FunctionSpec, version: str, warnings: list[str]) -> None:
    if spec.version is not None and not same_version(spec.version, version):
        warnings.append(
            f"function {spec.name!r}: versioning is auto, so version {version} is used, "
            f"not the {spec.version} written in the manifest"
        )


def _decide_manual(
    spec: FunctionSpec,
    checksum: str,
    package_version: str,
    history: FunctionHistory | None,
    warnings: list[str],
    conflicts: list[str],
    pins: Mapping[str, str],
) -> _Decision:
    version = spec.version or package_version
    if history is None:
        return _Decision(version, "new", None)
    current = _find(history, history.current)
    existing = _find(history, version)
    if existing is not None:
        changed = ["code checksum"] if existing.checksum != checksum else []
        changed += _record_differences(spec, existing, pins)
        if changed:
            suggestion = _highest(history).bump_patch()
            conflicts.append(
                f"function {spec.name!r}: version {existing.version} already exists and its "
                f"{', '.join(changed)} changed; bump the version (e.g. to {suggestion}) "
                "to deploy the new code"
            )
        return _Decision(existing.version, "unchanged", existing)
    if parse_version(version) < parse_version(history.current):
        warnings.append(
            f"function {spec.name!r}: version {version} is lower than the current {history.current}"
        )
    return _Decision(version, "updated", current)


def plan_deployment(
    manifest: Manifest,
    checksums: Mapping[str, str],
    history: PackageHistory | None = None,
    pins: Mapping[str, str] | None = None,
) -> DeploymentPlan:
    """Decide versions and statuses of a deployment; raise Conflict when it cannot happen.

    `checksums` maps every function of the manifest to its code checksum
    (`checksums.function_checksums`); `pins` is the resolved dependency closure
    (`dependency_rules`), `{name: version}`: a function whose code is unchanged but whose
    pins moved is a new version, as its code imports them.
    """
    pins = pins or {}
    history = history or PackageHistory()
    package = manifest.package
    taken = [v for v in history.versions if same_version(v, package.version)]
    if taken:
        existing = ", ".join(sort_versions(history.versions))
        raise Conflict(
            f"package {package.name!r} version {taken[0]} already exists (versions: "
            f"{existing}); bump package.version to deploy",
            {"versions": sort_versions(history.versions)},
        )
    is_latest = same_version(
        latest_version([*history.versions, package.version]) or "", package.version
    )
    canary = package.deployment.canary
    canary_on = package.deployment.strategy == "canary" and canary is not None and canary.enabled
    if canary_on and canary is not None:
        check_split(
            canary.traffic_split,
            history.versions,
            package.version,
            loc=("manifest", "package", "deployment", "canary", "traffic_split"),
        )
    if (package.deployment.strategy == "blue-green" or canary_on) and history.versions:
        # Contract 11: hosted and reachable by @version, off until promoted (the first
        # deployment of a package has nothing to stay behind, so it is current at once);
        # a canary's share of unpinned calls is routed at execute, not made current.
        is_latest = False
    release = package.release(package.version)
    warnings: list[str] = []
    conflicts: list[str] = []
    plans: list[FunctionPlan] = []
    for name, spec in manifest.functions.items():
        checksum = checksums[name]
        past = history.functions.get(name)
        if manifest.strategy_of(name) == "auto":
            decision = _decide_auto(spec, checksum, package.version, past, warnings, pins)
        else:
            decision = _decide_manual(
                spec, checksum, package.version, past, warnings, conflicts, pins
            )
        plans.append(_function_plan(spec, checksum, decision, release, is_latest or past is None))
    if conflicts:
        raise Conflict("; ".join(conflicts), {"functions": conflicts})
    removed = tuple(sorted(set(history.functions) - set(manifest.functions)))
    check_removals(manifest, history)
    changes = breaking_changes(manifest, plans, removed, history)
    return DeploymentPlan(
        package_name=package.name,
        package_version=package.version,
        is_stable=is_stable(package.version),
        is_latest=is_latest,
        functions=tuple(plans),
        removed_functions=removed,
        changelog=release,
        warnings=tuple(warnings),
        breaking_changes=changes,
    )


def _function_plan(
    spec: FunctionSpec,
    checksum: str,
    decision: _Decision,
    release: Release | None,
    becomes_current: bool,
) -> FunctionPlan:
    previous = decision.previous
    record: FunctionSpec | ExistingFunctionVersion
    reasons: list[str] = []
    changes: list[InterfaceChange] = []
    if decision.status == "unchanged" and previous is not None:
        # The stored immutable record is what this deployment carries.
        record = previous
        version, checksum, changelog = previous.version, previous.checksum, previous.changelog
    else:
        record = spec
        version = decision.version
        entries = _changelog_entries(release, spec.name)
        reasons = [f"changelog: {text}" for kind, text in entries if kind == "breaking"]
        if previous is not None:
            if parse_version(version).major > parse_version(previous.version).major:
                reasons.append(f"MAJOR version {version} after {previous.version}")
            changes = _interface_changes(spec, previous)
            reasons += [c.reason for c in breaking(changes)]
        changelog = spec.changelog_for(version)
        if changelog is None and entries:
            changelog = "\n".join(f"{kind}: {text}" for kind, text in entries)
    return FunctionPlan(
        name=spec.name,
        version=version,
        checksum=checksum,
        status=decision.status,
        handler=record.handler,
        typed=spec.typed,
        inputs_schema=spec.inputs_schema(),
        outputs_schema=spec.outputs_schema(),
        changelog=changelog,
        is_breaking_change=bool(reasons),
        breaking_reasons=tuple(reasons),
        deprecated=record.deprecated,
        deprecated_message=record.deprecated_message,
        removal_version=record.removal_version,
        previous_version=previous.version if previous is not None else None,
        becomes_current=becomes_current,
        interface_changes=tuple(changes),
        resources=dict(record.resources) if record.resources is not None else None,
    )
