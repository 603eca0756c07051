"""Search and filters of the listings (jobs, runs, workflows, packages, functions): the
arguments as both doors receive them (text), checked here once. Pure: the repositories apply
the parsed filters in SQL, beside the access clause.

- A name search matches a case-insensitive substring (`%` and `_` are literal), at most
  `MAX_SEARCH` characters; blank means no search.
- A time range is `*_after` (inclusive) and `*_before` (exclusive), each an ISO 8601 date
  (`2026-11-27`, midnight UTC) or date-time (without an offset: UTC).
- Statuses are repeatable; each must be one the listing knows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from calcgraph.domain.errors import FieldError, ValidationError

MAX_SEARCH = 200
INSTANT = "an ISO 8601 date or date-time, e.g. 2026-11-27 or 2026-11-27T18:00:00Z"


def parse_search(raw: str | None, name: str) -> str | None:
    """The search text, stripped; None when blank."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if len(text) > MAX_SEARCH:
        raise ValidationError(
            f"{name} must be at most {MAX_SEARCH} characters",
            [FieldError(("query", name), f"at most {MAX_SEARCH} characters")],
        )
    return text


def parse_instant(raw: str | None, name: str) -> datetime | None:
    """An aware UTC datetime, or None when absent or blank."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"{name} must be {INSTANT}, not {text[:40]!r}", [FieldError(("query", name), INSTANT)]
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_statuses(
    values: Sequence[str] | None, allowed: Sequence[str], noun: str = "status"
) -> tuple[str, ...]:
    """The statuses asked for, each once; `noun` names a status in the refusal."""
    unknown = [s for s in values or () if s not in allowed]
    if unknown:
        raise ValidationError(
            f"unknown {noun} {unknown[0]!r}",
            [FieldError(("query", "status"), f"one of {', '.join(allowed)}")],
        )
    return tuple(sorted(set(values or ())))


@dataclass(frozen=True)
class TimeRange:
    after: datetime | None = None
    """Inclusive."""
    before: datetime | None = None
    """Exclusive."""

    @classmethod
    def parse(cls, after: str | None, before: str | None, prefix: str) -> TimeRange:
        names = (f"{prefix}_after", f"{prefix}_before")
        found = cls(parse_instant(after, names[0]), parse_instant(before, names[1]))
        if found.after is not None and found.before is not None and found.after >= found.before:
            raise ValidationError(
                f"{names[0]} must be earlier than {names[1]}",
                [FieldError(("query", names[1]), f"later than {names[0]}")],
            )
        return found


@dataclass(frozen=True)
class JobFilter:
    function: str | None = None
    """A search in `package/function`."""
    statuses: tuple[str, ...] = ()
    created: TimeRange = TimeRange()


ALL_TIME = TimeRange()
EVERY_JOB = JobFilter()
