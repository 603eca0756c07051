"""What a deployment may not do to callers (contract 11, Removal and Breaking changes). Pure.

- Removal: a deployment whose package version is at or past a function's `removal_version`
  (declared in this manifest, or by the function's current version) and that still contains
  the function is refused with 422 naming it.
- Breaking changes: each function's typed I/O is compared with its current version's by the
  type rules (`interface_diff`); a function the package no longer declares is a break too.
  Under `manual`, a break without a MAJOR bump of the function's version (a MINOR bump while
  MAJOR is 0) is refused with 409 listing each; under `auto` the report lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from calcgraph.domain.errors import Conflict, FieldError, ValidationError
from calcgraph.domain.packages.interface_diff import InterfaceChange, breaking, function_changes
from calcgraph.domain.packages.semver_rules import Version, parse_version

if TYPE_CHECKING:
    from calcgraph.domain.packages.deployment_plan import FunctionPlan, PackageHistory
    from calcgraph.domain.packages.manifest import Manifest


def is_major_bump(before: Version, after: Version) -> bool:
    """A MAJOR bump, or a MINOR one below 1.0.0 (semver: 0.y.z may break at any MINOR)."""
    if after.major != before.major:
        return after.major > before.major
    return after.major == 0 and after.minor > before.minor


def check_removals(manifest: Manifest, history: PackageHistory) -> None:
    version = parse_version(manifest.package.version)
    errors: list[FieldError] = []
    for name, spec in manifest.functions.items():
        declared = {spec.removal_version}
        past = history.functions.get(name)
        current = past.versions.get(past.current) if past is not None else None
        if current is not None:
            declared.add(current.removal_version)
        due = sorted(
            (v for v in declared if v is not None and version >= parse_version(v)),
            key=parse_version,
        )
        if due:
            errors.append(
                FieldError(
                    ("manifest", "functions", name, "removal_version"),
                    f"function {name!r} is declared for removal in {due[0]}; version "
                    f"{manifest.package.version} must not contain it",
                )
            )
    if errors:
        raise ValidationError(
            "functions past their removal version: "
            + ", ".join(str(e.loc[2]) for e in errors)
            + f" (package version {manifest.package.version}); remove them from the manifest",
            errors,
        )


def breaking_changes(
    manifest: Manifest,
    plans: Sequence[FunctionPlan],
    removed: Sequence[str],
    history: PackageHistory,
) -> tuple[InterfaceChange, ...]:
    """Every break against the current versions; raises Conflict for those `manual` refuses."""
    found: list[InterfaceChange] = []
    refused: list[str] = []
    for plan in plans:
        breaks = breaking(list(plan.interface_changes))
        found += breaks
        if (
            breaks
            and manifest.strategy_of(plan.name) == "manual"
            and plan.previous_version is not None
            and not is_major_bump(parse_version(plan.previous_version), parse_version(plan.version))
        ):
            refused += [
                f"{c.reason} (function {plan.name!r} {plan.previous_version} -> {plan.version})"
                for c in breaks
            ]
    latest = max((parse_version(v) for v in history.versions), default=None)
    package_version = parse_version(manifest.package.version)
    for name in removed:
        gone = function_changes(name, (None, None), None)
        found += gone
        if (
            manifest.package.versioning_strategy == "manual"
            and latest is not None
            and not is_major_bump(latest, package_version)
        ):
            refused += [f"{c.reason} (package {latest} -> {package_version})" for c in gone]
    if refused:
        raise Conflict(
            "breaking changes need a MAJOR version bump (a MINOR one below 1.0.0) under manual "
            "versioning: " + "; ".join(refused),
            {"breaking_changes": [c.as_dict() for c in found]},
        )
    return tuple(found)
