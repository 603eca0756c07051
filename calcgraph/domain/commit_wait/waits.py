"""How long a request may be held waiting for the workers: each bound declared once, with the
one check every door's value goes through. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from calcgraph.domain.errors import FieldError, ValidationError

Where = tuple[str, ...]
"""Where the caller wrote the value, for the error (`("wait",)`, `("query", "wait")`)."""


@dataclass(frozen=True)
class Bound:
    """Seconds from `low` to `cap`: a larger value is capped, not refused (a client asking for
    more than the server grants still gets an answer); a value that is not a number of seconds
    from `low` is refused."""

    default: float
    cap: float
    message: str
    expected: str
    low: float = 0.0
    positive: bool = False
    """`low` itself is refused (an interval of 0 would spin)."""

    def seconds(self, asked: float | None, where: Where) -> float:
        if asked is None:
            return min(self.default, self.cap)
        too_low = asked <= 0 if self.positive else asked < 0
        if not math.isfinite(asked) or too_low:
            raise ValidationError(self.message, [FieldError(where, self.expected)])
        return min(max(asked, self.low), self.cap)

    def capped_at(self, cap: float) -> Bound:
        return replace(self, cap=cap)


EXECUTE_WAIT = Bound(
    default=30.0,
    # The operator's `execute_max_wait_seconds` caps it (`capped_at`).
    cap=math.inf,
    message="wait must be a number of seconds, 0 or more",
    expected="expected a number of seconds >= 0",
)
"""An execute call's wait for its job (spec: 30 s by default, 0 answers at once)."""

TICK_WAIT = Bound(
    default=0.0,
    cap=30.0,
    message="wait must be a number of seconds from 0 to 30",
    expected="expected a number of seconds from 0 to 30",
)
"""A long-poll tick's wait for a job of its run (without it a tick answers at once)."""

FOLLOW_INTERVAL = Bound(
    default=2.0,  # the specification's polling period of a run page
    cap=TICK_WAIT.cap,
    low=0.05,
    positive=True,
    message="interval must be a positive number of seconds",
    expected="expected seconds > 0",
)
"""How often a followed run (`runUpdates`) is ticked when none of its jobs finishes first."""
