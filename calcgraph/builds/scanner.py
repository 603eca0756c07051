"""The scanner port and the choice of adapter: trivy when it can run, else the OSV scanner."""

from __future__ import annotations

import shutil
from functools import lru_cache
from pathlib import Path

from calcgraph.builds.osv import OsvScanner
from calcgraph.builds.report import ScanError, Scanner, ScanReport
from calcgraph.builds.trivy import TrivyScanner
from calcgraph.settings import ScannerKind, Settings

__all__ = [
    "OsvScanner",
    "ScanError",
    "ScanReport",
    "Scanner",
    "TrivyScanner",
    "scanner_from_settings",
    "select_scanner",
]


def select_scanner(
    kind: ScannerKind,
    advisory_path: Path | None,
    *,
    trivy_program: str | None = None,
    timeout_seconds: float = 300.0,
    trivy_skip_db_update: bool = False,
) -> Scanner:
    """`auto`: trivy when the program is on PATH, else the OSV scanner; `trivy` insists on it.

    `trivy_program` overrides the PATH lookup (tests pass "" to mean "not installed").
    """
    program = shutil.which("trivy") if trivy_program is None else (trivy_program or None)
    if kind == "osv" or (kind == "auto" and program is None):
        return _osv_scanner(advisory_path)
    if program is None:
        raise ScanError("CALCGRAPH_SCANNER is trivy, but the trivy program is not on PATH")
    return TrivyScanner(
        program, timeout_seconds=timeout_seconds, skip_db_update=trivy_skip_db_update
    )


def scanner_from_settings(settings: Settings) -> Scanner:
    return select_scanner(
        settings.scanner,
        settings.advisory_db_path,
        timeout_seconds=settings.scan_timeout_seconds,
        trivy_skip_db_update=settings.trivy_skip_db_update,
    )


@lru_cache(maxsize=4)
def _osv_scanner(advisory_path: Path | None) -> OsvScanner:
    # One scanner per database path, so a dump of tens of thousands of files is read once.
    return OsvScanner(advisory_path)
