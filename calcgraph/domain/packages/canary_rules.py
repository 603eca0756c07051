"""A canary deployment's rules (contract 11, "Which version an unpinned call gets"). Pure.

- `check_split`: every version of `traffic_split` must be hosted (or be the one being
  deployed, which must be named); the parser already refused shares not adding up to 100.
- `route`: the version one unpinned call gets, a weighted choice by a draw in [0, 1) the
  caller makes (the service's `random.Random`, seeded in tests).
- `observe`: the candidate's finished jobs as figures: error rate (failed, not `cancelled`,
  over finished, cancelled ones left out of both) and the p95 of started -> finished.
- `verdict`: after `duration`, promote when every declared criterion holds, else roll back;
  before it, roll back at once when the error rate already exceeds its maximum after
  `EARLY_JOBS` finished jobs. A candidate with no finished job to judge is rolled back: no
  evidence is not a pass.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.manifest_package import SuccessCriteria
from calcgraph.domain.packages.semver_rules import sort_versions
from calcgraph.domain.read_models import attributes

DEFAULT_DURATION_SECONDS = 3600
"""`duration` when the manifest names none (contract 11: one hour)."""
EARLY_JOBS = 20
DECIDED_WITHIN_SECONDS = 10.0
"""A canary is promoted or rolled back within this of becoming due (contract 11)."""
JUDGE_INTERVAL_SECONDS = DECIDED_WITHIN_SECONDS / 2
"""The judge's timer ticks at least this often, whatever the sweeper's interval: half the
bound, so a round that is slow on a busy database still decides in time."""
"""Finished jobs after which an error rate above the maximum rolls the candidate back."""
NAMED_AT_MOST = 10
"""Versions a refusal names, however many the split has."""


def check_split(
    split: Mapping[str, float], hosted: Collection[str], deploying: str, *, loc: tuple[str, ...]
) -> None:
    """422 unless every version of the split is hosted, and the deployed one is named."""
    missing = sort_versions([v for v in split if v not in hosted and v != deploying])
    errors: list[FieldError] = []
    if missing:
        shown = ", ".join(missing[:NAMED_AT_MOST])
        more = f" and {len(missing) - NAMED_AT_MOST} more" if len(missing) > NAMED_AT_MOST else ""
        hosted_list = sort_versions(hosted)
        errors.append(
            FieldError(
                loc,
                f"names versions this package does not host: {shown}{more} (hosted: "
                f"{', '.join(hosted_list[-NAMED_AT_MOST:]) or 'none'}; and {deploying}, "
                "deployed now)",
            )
        )
    if deploying not in split:
        errors.append(FieldError(loc, f"must name the version deployed now, {deploying}"))
    if errors:
        raise ValidationError(
            "the canary's traffic_split " + "; ".join(e.msg for e in errors), errors
        )


def route(split: Sequence[tuple[str, float]], draw: float) -> str:
    """The version a draw in [0, 1) falls on, the versions laid end to end by their share
    (in the order given; shares of 0 are never chosen)."""
    total = sum(share for _, share in split if share > 0)
    if total <= 0:
        raise ValueError("a traffic split needs a positive share")
    point = draw * total
    chosen = ""
    for version, share in split:
        if share <= 0:
            continue
        chosen = version
        if point < share:
            return version
        point -= share
    return chosen  # rounding at the very end of the range


@dataclass(frozen=True)
class FinishedJob:
    failed: bool
    kind: str | None
    """The error kind of a failed job (`timeout`, `user_error`, `cancelled`, ...)."""
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Observed:
    jobs: int = 0
    failed: int = 0
    error_rate: float | None = None
    latency_p95_ms: float | None = None
    kinds: Mapping[str, int] = field(default_factory=dict)
    """Failures by error kind, for the reason of a roll-back."""

    def as_dict(self) -> dict[str, object]:
        return attributes(self, "jobs", "failed", "error_rate", "latency_p95_ms")


def p95(values: Sequence[float]) -> float | None:
    """The nearest-rank 95th percentile (the value at rank ceil(0.95 n))."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def observe(finished: Sequence[FinishedJob]) -> Observed:
    judged = [j for j in finished if not (j.failed and j.kind == "cancelled")]
    failed = [j for j in judged if j.failed]
    kinds: dict[str, int] = {}
    for job in failed:
        kinds[job.kind or "unknown"] = kinds.get(job.kind or "unknown", 0) + 1
    latencies = [
        (j.finished_at - j.started_at).total_seconds() * 1000
        for j in judged
        if j.started_at is not None and j.finished_at is not None
    ]
    latency = p95(latencies)
    return Observed(
        jobs=len(judged),
        failed=len(failed),
        error_rate=len(failed) / len(judged) if judged else None,
        latency_p95_ms=round(latency, 3) if latency is not None else None,
        kinds=kinds,
    )


Criteria = SuccessCriteria
"""What a verdict judges by is what the manifest declared: one declaration of the two maxima."""


@dataclass(frozen=True)
class Verdict:
    action: str
    """`promoted` or `rolled_back`."""
    reason: str


def _figures(observed: Observed) -> str:
    rate = observed.error_rate if observed.error_rate is not None else 0.0
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(observed.kinds.items()))
    latency = (
        f"{observed.latency_p95_ms:g} ms" if observed.latency_p95_ms is not None else "no figure"
    )
    return (
        f"{observed.failed} of {observed.jobs} finished jobs failed"
        + (f" ({kinds})" if kinds else "")
        + f", error rate {rate:.2%}, p95 {latency}"
    )


def verdict(observed: Observed, criteria: Criteria, *, due: bool) -> Verdict | None:
    """What the timer does now: None while the canary goes on."""
    rate_max = criteria.error_rate_max
    rate = observed.error_rate
    if rate_max is not None and rate is not None and rate > rate_max:
        if observed.jobs >= EARLY_JOBS or due:
            when = "" if due else f" after {observed.jobs} finished jobs, before its end"
            return Verdict(
                "rolled_back",
                f"canary judged{when}: {_figures(observed)}; error rate above the maximum "
                f"{rate_max:.2%}",
            )
    if not due:
        return None
    if observed.jobs == 0:
        return Verdict("rolled_back", "canary judged: no finished job of the candidate to judge")
    latency_max = criteria.latency_p95_max_ms
    latency = observed.latency_p95_ms
    if latency_max is not None and latency is not None and latency > latency_max:
        return Verdict(
            "rolled_back",
            f"canary judged: {_figures(observed)}; p95 above the maximum {latency_max:g} ms",
        )
    return Verdict("promoted", f"canary judged: {_figures(observed)}; within the criteria")
