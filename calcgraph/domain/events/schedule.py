"""When a failed webhook delivery is tried again (contract section 9). Pure."""

from __future__ import annotations

from collections.abc import Sequence

_FIRST = (5.0, 30.0, 120.0, 600.0, 1800.0)
_DAY = 86400.0


def _default() -> tuple[float, ...]:
    """5 s, 30 s, 2 min, 10 min, 30 min, then hourly while the total stays within 24 h."""
    delays = list(_FIRST)
    while sum(delays) + 3600.0 <= _DAY:
        delays.append(3600.0)
    return tuple(delays)


DEFAULT_RETRY_SCHEDULE: tuple[float, ...] = _default()

MAX_FAILED_IN_A_ROW = 50
"""A webhook whose last this many events all ended `failed` is disabled."""


def retry_delay(schedule: Sequence[float], attempt: int) -> float | None:
    """Seconds before the attempt after failed attempt `attempt` (1-based); None: spent."""
    index = attempt - 1
    return float(schedule[index]) if 0 <= index < len(schedule) else None
