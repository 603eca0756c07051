"""The event types of contract section 9, the kind of subject each is about (whose rules
decide who sees it), and the `type` filter of the pull and of webhooks. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SOURCE = "calcgraph"

FILE_UPLOADED = "calcgraph.file.uploaded"
CALCULATION_STARTED = "calcgraph.calculation.started"
USER_LOGIN = "calcgraph.user.login"
JOB_SUCCEEDED = "calcgraph.job.succeeded"
JOB_FAILED = "calcgraph.job.failed"
RUN_CREATED = "calcgraph.run.created"
RUN_COMPLETED = "calcgraph.run.completed"
RUN_FAILED = "calcgraph.run.failed"
RUN_CANCELLED = "calcgraph.run.cancelled"
BUILD_READY = "calcgraph.build.ready"
BUILD_REFUSED = "calcgraph.build.refused"
DEPLOYMENT_PROMOTED = "calcgraph.deployment.promoted"
DEPLOYMENT_ROLLED_BACK = "calcgraph.deployment.rolled_back"
WEBHOOK_DISABLED = "calcgraph.webhook.disabled"
WEBHOOK_TEST = "calcgraph.webhook.test"

SUBJECT_KINDS: dict[str, str] = {
    CALCULATION_STARTED: "job",
    JOB_SUCCEEDED: "job",
    JOB_FAILED: "job",
    RUN_CREATED: "run",
    RUN_COMPLETED: "run",
    RUN_FAILED: "run",
    RUN_CANCELLED: "run",
    BUILD_READY: "build",
    BUILD_REFUSED: "build",
    DEPLOYMENT_PROMOTED: "package",
    DEPLOYMENT_ROLLED_BACK: "package",
    USER_LOGIN: "user",
    WEBHOOK_DISABLED: "webhook",
    WEBHOOK_TEST: "webhook",
}
"""Who sees an event of each type, by its subject: `job` (who may GET the job), `run` (who may
GET the run), `package` (who may GET the package), `function` (who may GET the function's
package), `build` (the function's owner), `user` (that user), `webhook` (its owner). The file
event's subject is a package or a function: its kind is given where it is recorded."""

TYPES: tuple[str, ...] = (FILE_UPLOADED, *SUBJECT_KINDS)


def run_of(kind: str, subject: str, data: Mapping[str, Any]) -> str | None:
    """The workflow run an event belongs to, for the pull's `run` filter: a run event's own
    subject, a job event's `data.run_id` (None outside a run); no other event has one."""
    if kind == "run":
        return subject
    if kind == "job":
        run_id = data.get("run_id")
        return run_id if isinstance(run_id, str) else None
    return None


MAX_TYPES = 20
"""Type filters in one pull or on one webhook."""


class TypeFilterError(ValueError):
    """A `type` filter that names no event type (its message says which)."""


@dataclass(frozen=True)
class TypeFilter:
    """Exact types and prefixes (`calcgraph.run.*`); empty: every type."""

    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @property
    def everything(self) -> bool:
        return not self.exact and not self.prefixes

    def matches(self, event_type: str) -> bool:
        if self.everything or event_type in self.exact:
            return True
        return any(event_type.startswith(p) for p in self.prefixes)


def parse_types(values: Sequence[str]) -> TypeFilter:
    """Each value an event type, or a prefix ending in `*` (`*` alone: everything)."""
    if len(values) > MAX_TYPES:
        raise TypeFilterError(f"at most {MAX_TYPES} types")
    exact: set[str] = set()
    prefixes: list[str] = []
    for value in values:
        if not value or len(value) > 100 or "\x00" in value:
            raise TypeFilterError(f"{value[:100]!r} is not an event type")
        if value.endswith("*"):
            prefix = value[:-1]
            if "*" in prefix:
                raise TypeFilterError(f"{value!r}: `*` may only end a type")
            if prefix and not any(t.startswith(prefix) for t in TYPES):
                raise TypeFilterError(f"{value!r} matches no event type")
            prefixes.append(prefix)
        elif value in TYPES:
            exact.add(value)
        else:
            raise TypeFilterError(f"unknown event type {value!r}")
    if "" in prefixes:
        return TypeFilter(frozenset(), ())
    return TypeFilter(frozenset(exact), tuple(prefixes))
