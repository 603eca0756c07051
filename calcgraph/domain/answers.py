"""What one answer may hold (contract 8b, answers). Pure.

No answer is built beyond `ANSWER_MAX_BYTES`: a listing page holds fewer items than its
`limit` when their values would pass it (its `next_cursor` goes on from the last one), and a
value over `LISTED_VALUE_MAX_BYTES` is left out of listings (`outputs: null`,
`outputs_omitted: true`), read whole through its own address (`GET /jobs/{id}`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

ANSWER_MAX_BYTES = 16 * 1024 * 1024
LISTED_VALUE_MAX_BYTES = 64 * 1024
ROW_OVERHEAD_BYTES = 512
"""A listed row's fields besides its sized values (ids, times, statuses, names)."""
NODE_OVERHEAD_BYTES = 1024
"""A node of a run's answer besides its outputs: its state's fields and its plan entry."""


def value_size(value: Any) -> int:
    """The bytes of `value` as JSON (written in Rust: about a microsecond for a small one)."""
    return 0 if value is None else len(to_json(value))


class Budget:
    """What is left of one answer's bound for its sized values. `take` shows a value when it
    is at most `cap` bytes and still fits (and counts it), else leaves it out."""

    def __init__(self, total: int = ANSWER_MAX_BYTES) -> None:
        self.left = total

    def spend(self, size: int) -> None:
        self.left -= size

    def take(self, value: Any, cap: int = LISTED_VALUE_MAX_BYTES) -> bool:
        if value is None:
            return True
        size = value_size(value)
        if size > cap or size > self.left:
            return False
        self.left -= size
        return True


def listed(size: int | None) -> bool:
    """Whether a value of `size` bytes (None: no value) is shown in a listing."""
    return size is None or size <= LISTED_VALUE_MAX_BYTES


def rows_within(sizes: Sequence[int], budget: int = ANSWER_MAX_BYTES) -> int:
    """How many of the rows, in order, one answer holds: those whose sizes (each with its
    overhead) add up to at most `budget`, and always the first (a row alone is within the
    bound, its big values being left out)."""
    total = 0
    for count, size in enumerate(sizes):
        total += size + ROW_OVERHEAD_BYTES
        if total > budget and count > 0:
            return count
    return len(sizes)
