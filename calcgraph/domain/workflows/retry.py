"""Retry policies of function nodes (contract section 10). Pure.

A function node (or, as its default, a manifest function) may carry
`"retry": {"max_attempts": 1-10, "initial_interval_s": 1, "backoff_coefficient": 2,
"max_interval_s": 300, "on": [error kinds]}`. `parse` reads one as written, naming every
problem (the validation report's `invalid_retry_policies`); the planner freezes the parsed
policy into the run's plan, so a later workflow change does not alter an existing run's retries;
the tick asks `retries` and `delay`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from calcgraph.domain.read_models import attributes

ERROR_KINDS: tuple[str, ...] = (
    "user_error",
    "timeout",
    "out_of_memory",
    "sandbox_error",
    "infrastructure_error",
    "permission_denied",
    "input_error",
    "extract_error",
    "quota_exceeded",
    "cancelled",
)
"""Every error kind a node can fail with."""
NOT_RETRIED_BY_DEFAULT = frozenset({"user_error", "cancelled"})
DEFAULT_ON: tuple[str, ...] = tuple(k for k in ERROR_KINDS if k not in NOT_RETRIED_BY_DEFAULT)
MAX_ATTEMPTS = 10
_KEYS = ("max_attempts", "initial_interval_s", "backoff_coefficient", "max_interval_s", "on")
_MAX_SECONDS = 86_400.0
"""An interval beyond a day is refused: a run waiting a year for a retry is a mistake."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    initial_interval_s: float = 1.0
    backoff_coefficient: float = 2.0
    max_interval_s: float = 300.0
    on: tuple[str, ...] = DEFAULT_ON

    def retries(self, kind: str, attempt: int) -> bool:
        """Whether a failure of kind `kind` at attempt `attempt` (from 1) gets another one."""
        return kind in self.on and attempt < self.max_attempts

    def delay(self, attempt: int) -> timedelta:
        """The wait after the failed attempt `attempt` (from 1):
        min(initial × coefficient^(attempt − 1), max)."""
        exponent = max(attempt - 1, 0)
        try:
            seconds = self.initial_interval_s * self.backoff_coefficient**exponent
        except OverflowError:
            seconds = self.max_interval_s
        return timedelta(seconds=min(seconds, self.max_interval_s))

    def as_dict(self) -> dict[str, Any]:
        limits = ("max_attempts", "initial_interval_s", "backoff_coefficient", "max_interval_s")
        return {**attributes(self, *limits), "on": list(self.on)}


def _number(raw: Mapping[str, Any], name: str, default: float, low: float) -> float | str:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} must be a number"
    if not math.isfinite(value) or value < low or value > _MAX_SECONDS:
        return f"{name} must be from {low:g} to {_MAX_SECONDS:g}"
    return float(value)


def parse(raw: object) -> tuple[RetryPolicy | None, list[str]]:
    """The policy `raw` writes, or None and the reasons it is invalid (every one)."""
    if not isinstance(raw, Mapping):
        return None, ["retry must be an object"]
    problems: list[str] = []
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        problems.append(f"unknown retry keys: {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    attempts = raw.get("max_attempts")
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        problems.append(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS}")
    elif not 1 <= attempts <= MAX_ATTEMPTS:
        problems.append(f"max_attempts must be from 1 to {MAX_ATTEMPTS}, not {attempts}")
    initial = _number(raw, "initial_interval_s", 1.0, 0.0)
    coefficient = _number(raw, "backoff_coefficient", 2.0, 1.0)
    maximum = _number(raw, "max_interval_s", 300.0, 0.0)
    problems += [p for p in (initial, coefficient, maximum) if isinstance(p, str)]
    on = raw.get("on", list(DEFAULT_ON))
    kinds: tuple[str, ...] = ()
    if not isinstance(on, list) or not all(isinstance(k, str) for k in on):
        problems.append("on must be a list of error kinds")
    else:
        unknown_kinds = sorted({k for k in on if k not in ERROR_KINDS})
        if unknown_kinds:
            problems.append(
                f"unknown error kinds in on: {', '.join(unknown_kinds)} "
                f"(kinds: {', '.join(ERROR_KINDS)})"
            )
        kinds = tuple(dict.fromkeys(on))
    if problems:
        return None, problems
    assert isinstance(attempts, int)
    assert isinstance(initial, float)
    assert isinstance(coefficient, float)
    assert isinstance(maximum, float)
    return RetryPolicy(attempts, initial, coefficient, maximum, kinds), []


def from_dict(raw: Mapping[str, Any]) -> RetryPolicy:
    """A policy as a plan snapshot froze it (already valid)."""
    return RetryPolicy(
        int(raw["max_attempts"]),
        float(raw["initial_interval_s"]),
        float(raw["backoff_coefficient"]),
        float(raw["max_interval_s"]),
        tuple(raw["on"]),
    )
