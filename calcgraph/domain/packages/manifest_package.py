"""The `package:` section of a manifest (spec, Versioning 6): changelog, compatibility,
dependencies and deployment settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from calcgraph.domain.packages.manifest_reader import Loc, Problems, describe
from calcgraph.domain.packages.semver_rules import VersionRange

Strategy = Literal["auto", "manual"]
STRATEGIES: tuple[Strategy, ...] = ("auto", "manual")
ChangeType = Literal["feature", "fix", "breaking"]
CHANGE_TYPES: tuple[ChangeType, ...] = ("feature", "fix", "breaking")
DeploymentStrategy = Literal["rolling", "blue-green", "canary"]
DEPLOYMENT_STRATEGIES: tuple[DeploymentStrategy, ...] = ("rolling", "blue-green", "canary")

# Package and function names appear in paths (`/packages/{name}@{version}/functions/{f}`),
# so they exclude `/`, `@` and whitespace.
PACKAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
FUNCTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$")
_DURATION = re.compile(r"^(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?$")


@dataclass(frozen=True)
class Change:
    type: ChangeType
    description: str
    functions: tuple[str, ...] = ()
    """Functions the change concerns; none named means the whole package."""
    issue: str | None = None
    migration: str | None = None


@dataclass(frozen=True)
class Release:
    """One entry of `package.changelog`, keyed by the version it describes."""

    version: str
    date: str | None
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Compatibility:
    compatible_with: tuple[VersionRange, ...] = ()
    """Versions this one can replace; several ranges mean any of them."""
    breaking_changes_from: str | None = None


@dataclass(frozen=True)
class SuccessCriteria:
    error_rate_max: float | None = None
    """A fraction between 0 and 1 (`"2%"` is accepted and stored as 0.02)."""
    latency_p95_max_ms: float | None = None


@dataclass(frozen=True)
class Canary:
    enabled: bool = True
    traffic_split: Mapping[str, float] = field(default_factory=dict)
    """Version to percentage of traffic; the percentages add up to 100."""
    duration_seconds: int | None = None
    success_criteria: SuccessCriteria = field(default_factory=SuccessCriteria)


@dataclass(frozen=True)
class Deployment:
    strategy: DeploymentStrategy = "rolling"
    canary: Canary | None = None


@dataclass(frozen=True)
class PackageSection:
    name: str
    version: str
    versioning_strategy: Strategy = "auto"
    description: str | None = None
    changelog: tuple[Release, ...] = ()
    migration_guide: str | Mapping[str, str] | None = None
    """One text (or URL), or a text per version."""
    compatibility: Compatibility | None = None
    dependencies: Mapping[str, VersionRange] = field(default_factory=dict)
    deployment: Deployment = field(default_factory=Deployment)

    def release(self, version: str) -> Release | None:
        return next((r for r in self.changelog if r.version == version), None)


PACKAGE_KEYS_REQUIRED = ("version",)
PACKAGE_KEYS_OPTIONAL = (
    "name",
    "versioning_strategy",
    "description",
    "changelog",
    "migration_guide",
    "compatibility",
    "dependencies",
    "deployment",
)


def _issue(p: Problems, value: object, loc: Loc) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return p.string(value, loc, max_length=500)


def _change(p: Problems, value: object, loc: Loc, known: frozenset[str] | None) -> Change | None:
    """One change; `known` (the declared functions) is given for the version being deployed,
    whose entries must name functions it declares, except a breaking change, which may be
    the removal of the function it names. Older entries may name functions removed since."""
    raw = p.mapping(
        value,
        loc,
        required=("type", "description"),
        optional=("functions", "issue", "migration"),
    )
    if raw is None:
        return None
    kind = p.choice(raw.get("type"), (*loc, "type"), CHANGE_TYPES) if "type" in raw else None
    text = p.string(raw["description"], (*loc, "description")) if "description" in raw else None
    functions: list[str] = []
    if "functions" in raw:
        names = raw["functions"]
        if not isinstance(names, list):
            p.add((*loc, "functions"), f"must be a list of function names, not {describe(names)}")
        for i, name in enumerate(names if isinstance(names, list) else []):
            if not isinstance(name, str) or not FUNCTION_NAME.match(name):
                p.add((*loc, "functions", i), f"is not a function name: {describe(name)}")
            elif known is not None and raw.get("type") != "breaking" and name not in known:
                p.add(
                    (*loc, "functions", i),
                    f"names function {name!r}, which this package version does not declare",
                )
            else:
                functions.append(name)
    issue = _issue(p, raw["issue"], (*loc, "issue")) if "issue" in raw else None
    migration = p.string(raw["migration"], (*loc, "migration")) if "migration" in raw else None
    if kind is None or text is None:
        return None
    return Change(kind, text, tuple(functions), issue, migration)  # type: ignore[arg-type]


def _changelog(
    p: Problems, value: object, loc: Loc, current: str | None, known: frozenset[str] | None
) -> tuple[Release, ...]:
    releases: list[Release] = []
    for key, entry in p.entries(value, loc, what="versions"):
        here = (*loc, key)
        version = p.version(key, here)
        raw = p.mapping(entry, here, required=("changes",), optional=("date",))
        if raw is None:
            continue
        date = p.date(raw["date"], (*here, "date")) if "date" in raw else None
        changes: list[Change] = []
        items = raw.get("changes")
        if "changes" in raw and not isinstance(items, list):
            p.add((*here, "changes"), f"must be a list of changes, not {describe(items)}")
        for i, item in enumerate(items if isinstance(items, list) else []):
            names = known if version is not None and version == current else None
            change = _change(p, item, (*here, "changes", i), names)
            if change is not None:
                changes.append(change)
        if version is not None:
            releases.append(Release(version, date, tuple(changes)))
    return tuple(releases)


def _migration_guide(p: Problems, value: object, loc: Loc) -> str | Mapping[str, str] | None:
    return p.versioned_text(value, loc, max_length=20000)


def _compatibility(p: Problems, value: object, loc: Loc) -> Compatibility | None:
    raw = p.mapping(value, loc, required=(), optional=("compatible_with", "breaking_changes_from"))
    if raw is None:
        return None
    ranges: list[VersionRange] = []
    if "compatible_with" in raw:
        given = raw["compatible_with"]
        items = given if isinstance(given, list) else [given]
        for i, item in enumerate(items):
            here = (
                (*loc, "compatible_with", i)
                if isinstance(given, list)
                else (
                    *loc,
                    "compatible_with",
                )
            )
            parsed = p.range(item, here)
            if parsed is not None:
                ranges.append(parsed)
    breaking = None
    if "breaking_changes_from" in raw:
        breaking = p.version(raw["breaking_changes_from"], (*loc, "breaking_changes_from"))
    return Compatibility(tuple(ranges), breaking)


MAX_DEPENDENCIES = 49
"""The specification's limit on dependencies (fewer than 50), for a package's too."""


def _dependencies(p: Problems, value: object, loc: Loc) -> dict[str, VersionRange]:
    deps: dict[str, VersionRange] = {}
    entries = p.entries(value, loc, what="package names")
    if len(entries) > MAX_DEPENDENCIES:
        p.add(loc, f"at most {MAX_DEPENDENCIES} dependencies, not {len(entries)}")
        return deps
    for name, spec in entries:
        if not PACKAGE_NAME.match(name):
            p.add((*loc, name), "is not a package name (letters, digits, '.', '_', '-')")
            continue
        parsed = p.range(spec, (*loc, name))
        if parsed is not None:
            deps[name] = parsed
    return deps


def _duration(p: Problems, value: object, loc: Loc) -> int | None:
    """Seconds, or a text like `30m`, `1h30m`, `45s`."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        match = _DURATION.match(value.strip())
        if match and any(match.groups()):
            hours, minutes, seconds = (int(g or 0) for g in match.groups())
            total = hours * 3600 + minutes * 60 + seconds
            if total > 0:
                return total
    p.add(loc, f"must be a positive number of seconds or a text like '30m', not {describe(value)}")
    return None


def _error_rate(p: Problems, value: object, loc: Loc) -> float | None:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            percent = float(value.strip()[:-1])
        except ValueError:
            percent = -1.0
        if 0 <= percent <= 100:
            return percent / 100
        p.add(loc, f"must be a percentage between 0% and 100%, not {value!r}")
        return None
    return p.number(value, loc, minimum=0, maximum=1)


def _criteria(p: Problems, value: object, loc: Loc) -> SuccessCriteria:
    raw = p.mapping(value, loc, required=(), optional=("error_rate_max", "latency_p95_max"))
    if raw is None:
        return SuccessCriteria()
    rate = (
        _error_rate(p, raw["error_rate_max"], (*loc, "error_rate_max"))
        if ("error_rate_max" in raw)
        else None
    )
    latency = None
    if "latency_p95_max" in raw:
        latency = p.number(raw["latency_p95_max"], (*loc, "latency_p95_max"), minimum=0)
        if latency == 0:
            p.add((*loc, "latency_p95_max"), "must be more than 0 ms")
            latency = None
    return SuccessCriteria(rate, latency)


def _canary(p: Problems, value: object, loc: Loc) -> Canary | None:
    raw = p.mapping(
        value,
        loc,
        required=(),
        optional=("enabled", "traffic_split", "duration", "success_criteria"),
    )
    if raw is None:
        return None
    enabled = p.boolean(raw["enabled"], (*loc, "enabled")) if "enabled" in raw else True
    split: dict[str, float] = {}
    if "traffic_split" in raw:
        here = (*loc, "traffic_split")
        for version, share in p.entries(raw["traffic_split"], here, what="versions"):
            clean = p.version(version, (*here, version))
            percent = p.number(share, (*here, version), minimum=0, maximum=100)
            if clean is not None and percent is not None:
                split[clean] = percent
        if split and abs(sum(split.values()) - 100) > 1e-6:
            p.add(here, f"percentages must add up to 100, not {sum(split.values()):g}")
    elif enabled:
        p.add((*loc, "traffic_split"), "is required when the canary is enabled")
    duration = _duration(p, raw["duration"], (*loc, "duration")) if "duration" in raw else None
    criteria = (
        _criteria(p, raw["success_criteria"], (*loc, "success_criteria"))
        if "success_criteria" in raw
        else SuccessCriteria()
    )
    return Canary(bool(enabled), split, duration, criteria)


def _deployment(p: Problems, value: object, loc: Loc) -> Deployment:
    raw = p.mapping(value, loc, required=(), optional=("strategy", "canary"))
    if raw is None:
        return Deployment()
    strategy = "rolling"
    if "strategy" in raw:
        strategy = p.choice(raw["strategy"], (*loc, "strategy"), DEPLOYMENT_STRATEGIES) or strategy
    canary = _canary(p, raw["canary"], (*loc, "canary")) if "canary" in raw else None
    if strategy == "canary" and "canary" not in raw:
        p.add((*loc, "canary"), "is required when the strategy is canary")
    if strategy != "canary" and "canary" in raw:
        p.add((*loc, "canary"), f"applies only to the canary strategy, not {strategy}")
    return Deployment(strategy, canary)  # type: ignore[arg-type]


def parse_package_section(
    p: Problems,
    raw: dict[str, object],
    loc: Loc,
    name: str | None,
    function_names: frozenset[str] | None = None,
) -> PackageSection | None:
    """Check the keys of `package:` already filtered by `Problems.mapping`."""
    version = p.version(raw["version"], (*loc, "version")) if "version" in raw else None
    strategy: str | None = "auto"
    if "versioning_strategy" in raw:
        strategy = p.choice(raw["versioning_strategy"], (*loc, "versioning_strategy"), STRATEGIES)
    description = (
        p.string(raw["description"], (*loc, "description")) if "description" in raw else None
    )
    changelog = (
        _changelog(p, raw["changelog"], (*loc, "changelog"), version, function_names)
        if "changelog" in raw
        else ()
    )
    guide = (
        _migration_guide(p, raw["migration_guide"], (*loc, "migration_guide"))
        if "migration_guide" in raw
        else None
    )
    compatibility = (
        _compatibility(p, raw["compatibility"], (*loc, "compatibility"))
        if "compatibility" in raw
        else None
    )
    deps = (
        _dependencies(p, raw["dependencies"], (*loc, "dependencies"))
        if "dependencies" in raw
        else {}
    )
    if name is not None and name in deps:
        p.add((*loc, "dependencies", name), "a package cannot depend on itself")
    deployment = (
        _deployment(p, raw["deployment"], (*loc, "deployment"))
        if "deployment" in raw
        else Deployment()
    )
    if name is None or version is None or strategy is None:
        return None
    return PackageSection(
        name=name,
        version=version,
        versioning_strategy=strategy,  # type: ignore[arg-type]
        description=description,
        changelog=changelog,
        migration_guide=guide,
        compatibility=compatibility,
        dependencies=deps,
        deployment=deployment,
    )
