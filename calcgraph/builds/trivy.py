"""The trivy scanner: `trivy rootfs` on an artifact directory, `trivy image` on an image.

Only findings in Python packages count. Operating-system packages of a base image are the base
image's concern; refusing a user's build for them would refuse every build until the base image
is rebuilt.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calcgraph.builds.report import ScanError, ScanReport
from calcgraph.domain.builds.advisories import (
    Finding,
    InstalledDistribution,
    Severity,
    score_severity,
)

# Result types trivy gives Python packages: installed metadata, then the lock-file formats.
PYTHON_TYPES = frozenset({"python-pkg", "pip", "pipenv", "poetry", "uv", "pdm"})
_TAIL_CHARS = 2000


class TrivyScanner:
    def __init__(
        self,
        program: str,
        *,
        timeout_seconds: float = 300.0,
        skip_db_update: bool = False,
    ) -> None:
        self.program = program
        self.timeout_seconds = timeout_seconds
        self.skip_db_update = skip_db_update

    @property
    def name(self) -> str:
        return "trivy"

    def command(self, target: Path | str) -> list[str]:
        mode = "rootfs" if isinstance(target, Path) else "image"
        command = [
            self.program,
            mode,
            "--format",
            "json",
            "--scanners",
            "vuln",
            "--list-all-pkgs",
            "--quiet",
            "--timeout",
            f"{int(self.timeout_seconds)}s",
        ]
        if self.skip_db_update:
            command.append("--skip-db-update")
        return [*command, str(target)]

    def scan(
        self,
        target: Path | str,
        distributions: Sequence[InstalledDistribution] | None = None,
    ) -> ScanReport:
        if isinstance(target, Path) and not target.is_dir():
            raise ScanError(f"artifact directory {target} does not exist")
        try:
            done = subprocess.run(  # a fixed program, no shell
                self.command(target),
                capture_output=True,
                text=True,
                timeout=self.timeout_seconds + 30,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ScanError(f"trivy did not finish within {self.timeout_seconds:g} s") from exc
        except OSError as exc:
            raise ScanError(f"trivy could not be started: {exc}") from exc
        if done.returncode != 0:
            raise ScanError(f"trivy failed ({done.returncode}): {done.stderr[-_TAIL_CHARS:]}")
        try:
            document = json.loads(done.stdout)
        except ValueError as exc:
            raise ScanError("trivy printed something other than a JSON report") from exc
        if not isinstance(document, dict):
            raise ScanError("trivy printed something other than a JSON report")
        findings, listed = parse_trivy_report(document)
        return ScanReport(
            scanner=self.name,
            distributions=tuple(distributions) if distributions is not None else tuple(listed),
            findings=tuple(findings),
        )


def parse_trivy_report(
    document: Mapping[str, Any],
) -> tuple[list[Finding], list[InstalledDistribution]]:
    """Findings and packages of the Python results of a trivy JSON report (schema version 2)."""
    findings: dict[tuple[str, str, str], Finding] = {}
    packages: dict[tuple[str, str], InstalledDistribution] = {}
    for result in _dicts(document.get("Results")):
        if result.get("Type") not in PYTHON_TYPES:
            continue
        for package in _dicts(result.get("Packages")):
            name, version = package.get("Name"), package.get("Version")
            if isinstance(name, str) and isinstance(version, str):
                packages[(name, version)] = InstalledDistribution(name, version)
        for vulnerability in _dicts(result.get("Vulnerabilities")):
            finding = _finding(vulnerability)
            if finding is not None:
                # The same package can be reported by two results (metadata and a lock file).
                key = (finding.package, finding.version, finding.advisory_id)
                findings.setdefault(key, finding)
    return list(findings.values()), list(packages.values())


def _finding(vulnerability: Mapping[str, Any]) -> Finding | None:
    name = vulnerability.get("PkgName")
    version = vulnerability.get("InstalledVersion")
    identifier = vulnerability.get("VulnerabilityID")
    if not (isinstance(name, str) and isinstance(version, str) and isinstance(identifier, str)):
        return None
    word = vulnerability.get("Severity")
    score = _score(vulnerability.get("CVSS"))
    if isinstance(word, str) and word.upper() in Severity.__members__:
        severity = Severity(word.upper())
    elif score is not None:
        severity = score_severity(score)
    else:
        severity = Severity.UNKNOWN
    title = vulnerability.get("Title")
    vendor_ids = vulnerability.get("VendorIDs")
    return Finding(
        package=name,
        version=version,
        advisory_id=identifier,
        severity=severity,
        score=score,
        summary=" ".join(title.split())[:200] if isinstance(title, str) else "",
        aliases=tuple(v for v in vendor_ids if isinstance(v, str))
        if isinstance(vendor_ids, list)
        else (),
    )


def _score(cvss: object) -> float | None:
    """The highest CVSS v3 score any source gives; trivy's own Severity word is preferred."""
    scores = [
        float(source["V3Score"])
        for source in (cvss.values() if isinstance(cvss, dict) else ())
        if isinstance(source, dict) and isinstance(source.get("V3Score"), int | float)
    ]
    return max(scores) if scores else None


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
