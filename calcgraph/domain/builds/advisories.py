"""Matching installed Python distributions against advisories in the OSV schema, and the verdict.

OSV schema: https://ossf.github.io/osv-schema/. Only `PyPI` packages are considered; names are
compared in their PEP 503 normal form and versions with PEP 440 ordering. Severity comes from a
CVSS vector when the record has one (v4, then v3, then v2), else from the `database_specific`
severity word that GitHub advisories carry, else it is UNKNOWN.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from cvss import CVSS2, CVSS3, CVSS4, CVSSError  # type: ignore[import-untyped]
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


class Severity(StrEnum):
    CRITICAL = "CRITICAL"
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"
    UNKNOWN = "UNKNOWN"


_RANK = {
    Severity.CRITICAL: 4,
    Severity.HIGH: 3,
    Severity.MEDIUM: 2,
    Severity.LOW: 1,
    Severity.UNKNOWN: 0,
}
# GitHub writes MODERATE where CVSS says MEDIUM.
_WORDS = {
    "CRITICAL": Severity.CRITICAL,
    "HIGH": Severity.HIGH,
    "MODERATE": Severity.MEDIUM,
    "MEDIUM": Severity.MEDIUM,
    "LOW": Severity.LOW,
}
_CVSS_TYPES = ("CVSS_V4", "CVSS_V3", "CVSS_V2")


@dataclass(frozen=True)
class InstalledDistribution:
    name: str
    version: str


@dataclass(frozen=True)
class Finding:
    """One advisory that affects one installed distribution."""

    package: str
    version: str
    advisory_id: str
    severity: Severity
    score: float | None = None
    summary: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def warning(self) -> str:
        text = f"{self.package} {self.version}: {self.advisory_id} ({self.severity})"
        return f"{text} {self.summary}" if self.summary else text


@dataclass(frozen=True)
class Verdict:
    """What the build answers: CRITICAL findings refuse it, HIGH ones only warn."""

    critical: int
    high: int
    warnings: tuple[str, ...]
    findings: tuple[Finding, ...] = field(default=(), compare=False)

    @property
    def refused(self) -> bool:
        return self.critical >= 1

    def as_dict(self) -> dict[str, Any]:
        """The `vulnerabilities` object of the build response and of the build record."""
        return {"critical": self.critical, "high": self.high, "warnings": list(self.warnings)}


def score_severity(score: float) -> Severity:
    """CVSS v3/v4 qualitative rating. A score of 0.0 ("none") is kept as LOW: it still is an
    advisory against the package, and it never refuses a build."""
    if score >= 9.0:
        return Severity.CRITICAL
    if score >= 7.0:
        return Severity.HIGH
    if score >= 4.0:
        return Severity.MEDIUM
    return Severity.LOW


def cvss_severity(kind: str, vector: str) -> tuple[Severity, float] | None:
    """The severity and base score of a CVSS vector, or None when it cannot be read."""
    try:
        if kind == "CVSS_V4":
            score = float(Decimal(CVSS4(vector).base_score))
        elif kind == "CVSS_V3":
            score = float(Decimal(CVSS3(vector).base_score))
        elif kind == "CVSS_V2":
            score = float(Decimal(CVSS2(vector).base_score))
            # CVSS v2 has no critical band: 7.0 and above is its highest rating.
            return (Severity.HIGH if score >= 7.0 else score_severity(score)), score
        else:
            return None
    except (CVSSError, ValueError, TypeError, KeyError, ArithmeticError):
        return None
    return score_severity(score), score


def advisory_severity(
    record: Mapping[str, Any], affected: Mapping[str, Any] | None = None
) -> tuple[Severity, float | None]:
    """Severity of an advisory; an `affected` entry's own severity list takes precedence."""
    for holder in (affected, record):
        entries = holder.get("severity") if holder else None
        if not isinstance(entries, list):
            continue
        by_kind: dict[str, str] = {}
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("score"), str):
                by_kind.setdefault(str(entry.get("type")), entry["score"])
        for kind in _CVSS_TYPES:
            if kind in by_kind:
                rated = cvss_severity(kind, by_kind[kind])
                if rated is not None:
                    return rated
    for holder in (affected, record):
        specific = holder.get("database_specific") if holder else None
        if isinstance(specific, dict):
            word = specific.get("severity")
            if isinstance(word, str) and word.upper() in _WORDS:
                return _WORDS[word.upper()], None
    return Severity.UNKNOWN, None


def is_pypi(affected: Mapping[str, Any]) -> bool:
    package = affected.get("package")
    if not isinstance(package, dict):
        return False
    ecosystem = package.get("ecosystem")
    return isinstance(ecosystem, str) and ecosystem.split(":")[0] == "PyPI"


def affected_package_name(affected: Mapping[str, Any]) -> str | None:
    """The PEP 503 name of a PyPI entry of `affected`, or None for any other ecosystem."""
    if not is_pypi(affected):
        return None
    name = affected["package"].get("name")
    return canonicalize_name(name) if isinstance(name, str) and name else None


def version_affected(affected: Mapping[str, Any], version: str) -> bool:
    """Whether `version` is affected according to one `affected` entry (versions and ranges)."""
    listed = affected.get("versions")
    parsed = _version(version)
    if isinstance(listed, list):
        for candidate in listed:
            if candidate == version or (parsed is not None and _version(candidate) == parsed):
                return True
    if parsed is None:
        return False
    ranges = affected.get("ranges")
    if not isinstance(ranges, list):
        return False
    return any(
        _in_range(r, parsed)
        for r in ranges
        if isinstance(r, dict) and r.get("type") in ("ECOSYSTEM", "SEMVER")
    )


def _in_range(range_: Mapping[str, Any], version: Version) -> bool:
    """The OSV evaluation: walk events in version order; introduced opens, fixed and
    last_affected close. An event whose version cannot be read is skipped."""
    events: list[tuple[Version, int, str]] = []
    for event in range_.get("events") or ():
        if not isinstance(event, dict):
            continue
        for order, kind in enumerate(("introduced", "fixed", "last_affected")):
            value = event.get(kind)
            if not isinstance(value, str):
                continue
            at = Version("0") if kind == "introduced" and value == "0" else _version(value)
            if at is not None:
                events.append((at, order, kind))
    affected = False
    for at, _, kind in sorted(events):
        if kind == "introduced" and version >= at:
            affected = True
        elif kind == "fixed" and version >= at:
            affected = False
        elif kind == "last_affected" and version > at:
            affected = False
    return affected


def _version(text: object) -> Version | None:
    if not isinstance(text, str):
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


class AdvisoryIndex:
    """Advisories indexed by the PEP 503 name of each PyPI package they affect."""

    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self._by_name: dict[str, list[Mapping[str, Any]]] = {}
        self.size = 0
        for record in records:
            self.add(record)

    def add(self, record: Mapping[str, Any]) -> None:
        # A withdrawn advisory was a mistake; it must not refuse anything.
        if not isinstance(record.get("id"), str) or record.get("withdrawn"):
            return
        names = {
            name
            for affected in record.get("affected") or ()
            if isinstance(affected, dict)
            for name in [affected_package_name(affected)]
            if name is not None
        }
        for name in names:
            self._by_name.setdefault(name, []).append(record)
        if names:
            self.size += 1

    def match(self, installed: Iterable[InstalledDistribution]) -> list[Finding]:
        findings: list[Finding] = []
        for dist in installed:
            name = canonicalize_name(dist.name)
            candidates = [
                _finding(dist, record, affected)
                for record in self._by_name.get(name, ())
                for affected in record.get("affected") or ()
                if isinstance(affected, dict)
                and affected_package_name(affected) == name
                and version_affected(affected, dist.version)
            ]
            findings.extend(_without_aliases(candidates))
        return findings


def match_advisories(
    installed: Iterable[InstalledDistribution], records: Iterable[Mapping[str, Any]]
) -> list[Finding]:
    return AdvisoryIndex(records).match(installed)


def _finding(
    dist: InstalledDistribution, record: Mapping[str, Any], affected: Mapping[str, Any]
) -> Finding:
    severity, score = advisory_severity(record, affected)
    summary = record.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        details = record.get("details")
        summary = details.strip().splitlines()[0] if isinstance(details, str) and details else ""
    aliases = record.get("aliases")
    if not isinstance(aliases, list):
        aliases = []
    return Finding(
        package=dist.name,
        version=dist.version,
        advisory_id=record["id"],
        severity=severity,
        score=score,
        summary=" ".join(summary.split())[:200],
        aliases=tuple(a for a in aliases if isinstance(a, str)),
    )


def _without_aliases(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per vulnerability of a package: a real dump holds the same vulnerability
    under several ids (PYSEC-..., GHSA-...) that alias each other, and it must count once.
    The most severe record of a group is kept."""
    kept: list[Finding] = []
    seen: set[str] = set()
    ordered = sorted(findings, key=lambda f: (-_RANK[f.severity], f.advisory_id))
    for finding in ordered:
        ids = {finding.advisory_id, *finding.aliases}
        if ids & seen:
            continue
        seen |= ids
        kept.append(finding)
    return kept


def verdict(findings: Iterable[Finding]) -> Verdict:
    """Counts of CRITICAL and HIGH findings, and a warning line for each, most severe first."""
    ordered = sorted(
        findings, key=lambda f: (-_RANK[f.severity], canonicalize_name(f.package), f.advisory_id)
    )
    shown = [f for f in ordered if f.severity in (Severity.CRITICAL, Severity.HIGH)]
    return Verdict(
        critical=sum(f.severity is Severity.CRITICAL for f in ordered),
        high=sum(f.severity is Severity.HIGH for f in ordered),
        warnings=tuple(f.warning for f in shown),
        findings=tuple(ordered),
    )
