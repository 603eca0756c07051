"""What every scanner answers, and the port the build pipeline scans through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from calcgraph.domain.builds.advisories import Finding, InstalledDistribution, Verdict, verdict


class ScanError(Exception):
    """The scan could not be done (scanner missing, failing or timing out): the build failed,
    which is not the same as a build refused for its vulnerabilities."""


@dataclass(frozen=True)
class ScanReport:
    scanner: str
    """Which scanner and database answered, for the build log."""
    distributions: tuple[InstalledDistribution, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    """Caveats the build log must show, e.g. that no advisory database is configured."""

    @property
    def verdict(self) -> Verdict:
        return verdict(self.findings)

    @property
    def refused(self) -> bool:
        return self.verdict.refused


class Scanner(Protocol):
    """Scans a built artifact: a directory made by `pip install --target`, or an image reference.

    `distributions`, when the caller already knows them, spares the scanner finding them again;
    a scanner that reads the artifact itself may ignore them. Blocking: call it from a worker
    thread or an actor, not from the event loop.
    """

    @property
    def name(self) -> str: ...

    def scan(
        self,
        target: Path | str,
        distributions: Sequence[InstalledDistribution] | None = None,
    ) -> ScanReport: ...
