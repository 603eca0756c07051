"""JSON form of the `package:` section, as stored in `PackageVersion.manifest`: only the keys
that carry a value, so that the stored form parses back to the same manifest."""

from __future__ import annotations

from typing import Any

from calcgraph.domain.packages.manifest_package import PackageSection, Release


def package_as_json(section: PackageSection) -> dict[str, Any]:
    """JSON-safe form for `PackageVersion.manifest` (YAML dates become ISO strings)."""
    result: dict[str, Any] = {
        "name": section.name,
        "version": section.version,
        "versioning_strategy": section.versioning_strategy,
    }
    if section.description is not None:
        result["description"] = section.description
    if section.changelog:
        result["changelog"] = {r.version: release_as_json(r) for r in section.changelog}
    if section.migration_guide is not None:
        guide = section.migration_guide
        result["migration_guide"] = guide if isinstance(guide, str) else dict(guide)
    if section.compatibility is not None:
        compat: dict[str, Any] = {}
        if section.compatibility.compatible_with:
            compat["compatible_with"] = [str(r) for r in section.compatibility.compatible_with]
        if section.compatibility.breaking_changes_from is not None:
            compat["breaking_changes_from"] = section.compatibility.breaking_changes_from
        result["compatibility"] = compat
    if section.dependencies:
        result["dependencies"] = {k: str(v) for k, v in section.dependencies.items()}
    deployment: dict[str, Any] = {"strategy": section.deployment.strategy}
    canary = section.deployment.canary
    if canary is not None:
        criteria = {
            "error_rate_max": canary.success_criteria.error_rate_max,
            "latency_p95_max": canary.success_criteria.latency_p95_max_ms,
        }
        deployment["canary"] = {
            "enabled": canary.enabled,
            **({"traffic_split": dict(canary.traffic_split)} if canary.traffic_split else {}),
            **({"duration": canary.duration_seconds} if canary.duration_seconds else {}),
            "success_criteria": {k: v for k, v in criteria.items() if v is not None},
        }
    result["deployment"] = deployment
    return result


def release_as_json(release: Release) -> dict[str, Any]:
    return {
        **({"date": release.date} if release.date is not None else {}),
        "changes": [
            {
                "type": c.type,
                "description": c.description,
                "functions": list(c.functions),
                **({"issue": c.issue} if c.issue is not None else {}),
                **({"migration": c.migration} if c.migration is not None else {}),
            }
            for c in release.changes
        ],
    }
