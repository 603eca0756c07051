"""What building submitted code needs from the outside world, as the build use case sees it:
the adapter (`calcgraph.builds.local.LocalBuilds`: pip or docker, the scanner, the registry,
log files) is injected by the door."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class BuildRequest:
    function: str
    files: dict[str, str]
    requirements: tuple[str, ...]


@dataclass(frozen=True)
class BuildReport:
    """One build's outcome, with its log."""

    status: Literal["success", "refused", "failed"]
    duration_seconds: float
    log: str
    reference: str | None = None
    """What a version runs from (`docker:<image>` or `artifact:<sha256>`); on success only."""
    size_bytes: int | None = None
    vulnerabilities: dict[str, Any] = field(default_factory=dict)
    """The scan's verdict; empty when the build failed before the scan."""
    reason: str | None = None


class Builds(Protocol):
    async def build(self, request: BuildRequest) -> BuildReport:
        """Build, scan and store `request` (blocking work off the event loop)."""
        ...

    async def store_log(self, build_id: str, text: str) -> str:
        """Keep a build's log; answers the key to read it by."""
        ...

    async def read_log(self, key: str) -> str | None:
        """The log stored under `key`; None when it is no longer there."""
        ...
