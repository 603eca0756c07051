"""How a job ended, as its row keeps it. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """A finished job's `status`, `outputs` (of a success only), `error` (as JSON) and `logs`:
    what a worker records of a run (`RunResult.recorded`), whether it ends one job (`Finish`)
    or a node of a chain (`Link`)."""

    status: str
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    logs: str
