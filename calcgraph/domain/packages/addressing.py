"""Addressing: which one version a versioned call or a workflow reference means.

Used for every versioned call path of the specification (`{function}@{version}`,
`{package}@{version}`, `@latest`, none) and for the `package/function@version` references
of workflow graphs (contract 5). A version that does not exist is `NotFound` naming those
that do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from calcgraph.domain.errors import NotFound
from calcgraph.domain.packages.semver_rules import (
    latest_version,
    parse_version,
    same_version,
    sort_versions,
)


@dataclass(frozen=True)
class FunctionRef:
    """`<package>/<function>[@<version>]` (contract 5), or a path's `name@version` parts."""

    package: str
    function: str
    selector: str | None = None


def split_selector(segment: str) -> tuple[str, str | None]:
    """`cantilever@1.2.0` -> (`cantilever`, `1.2.0`); no `@` -> (`cantilever`, None)."""
    name, sep, selector = segment.partition("@")
    return name, (selector if sep else None)


def parse_function_ref(text: str) -> FunctionRef | None:
    """A `package/function[@version]` reference, or None when the text is not one."""
    package, sep, rest = text.partition("/")
    if not sep or not package or "/" in rest:
        return None
    function, selector = split_selector(rest)
    if not function or selector == "":
        return None
    return FunctionRef(package, function, selector)


def select_version(
    versions: Iterable[str], selector: str | None, *, subject: str, current: str | None = None
) -> str:
    """The one version a selector addresses: None or `latest` -> `current` when given, else
    the latest (stable preferred); otherwise the exact version (a leading `v` is accepted).

    Raises NotFound naming the versions that exist.
    """
    available = sort_versions(set(versions))
    latest = current if current in available else latest_version(available)
    if not available or latest is None:
        raise NotFound(f"{subject} has no versions", {"versions": []})
    if selector is None or selector == "latest":
        return latest
    wanted = selector[1:] if selector.startswith("v") else selector
    if wanted in available:
        return wanted
    try:
        parse_version(wanted)
    except ValueError:
        matches: list[str] = []
    else:
        matches = [v for v in available if same_version(v, wanted)]
    if len(matches) == 1:
        return matches[0]
    raise NotFound(
        f"{subject} has no version {selector!r}; versions: {', '.join(available)} "
        f"(latest: {latest})",
        {"versions": available, "latest": latest},
    )
