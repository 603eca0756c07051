"""What a deprecated function version tells its callers (contract 11, Deprecation). Pure.

- An execute answer carries `Deprecation: @<Unix time>` (RFC 9745), the time of the deployment
  that deprecated the version: a function version is immutable and its `deprecated` flag is part
  of its record, so that deployment is the one that wrote the version (`created_at`).
- Its `warnings` hold one line, `<name> is deprecated: <message>; removed in <version>` (the
  message and the removal are left out when the manifest declared none).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from calcgraph.domain.functions.views import FunctionVersionView


@dataclass(frozen=True)
class Deprecation:
    since: datetime
    """When the deployment that deprecated the version happened."""
    warning: str

    @property
    def header(self) -> str:
        """The RFC 9745 `Deprecation` field value: `@` and a Unix time in seconds."""
        since = self.since if self.since.tzinfo else self.since.replace(tzinfo=UTC)
        return f"@{int(since.timestamp())}"


def deprecation_warning(name: str, message: str | None, removal_version: str | None) -> str:
    text = f"{name} is deprecated"
    if message:
        text += f": {message}"
    if removal_version:
        text += f"; removed in {removal_version}"
    return text


def deprecation_of(name: str, version: FunctionVersionView) -> Deprecation | None:
    """The deprecation `version` of function `name` carries, or None when it carries none."""
    if not version.deprecated:
        return None
    return Deprecation(
        since=version.created_at,
        warning=deprecation_warning(name, version.deprecated_message, version.removal_version),
    )
