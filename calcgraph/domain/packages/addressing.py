"""Addressing: which one version a versioned call or a workflow reference means.

Used for every versioned call path of the specification (`{function}@{version}`,
`{package}@{version}`, `@latest`, none) and for the `package/function@version` references
of workflow graphs (contract 5). A version that does not exist is `NotFound` naming those
that do. An execute call names its function in one of these forms (`ExecuteAddress`):

POST /functions/{function_id}/execute                            -> by_function_id
POST /packages/{package_id or name}/functions/{function}/execute -> latest of that function
POST /packages/{package}/functions/{function}@{version}/execute  -> that version (`@latest`)
POST /packages/{package}@{version}/functions/{function}/execute  -> that package deployment
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from calcgraph.domain.errors import InvalidRequest, NotFound
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


@dataclass(frozen=True)
class ExecuteAddress:
    """Which function version a call names: by id, or by package and function, each with an
    optional selector (`None`, `latest` or a version)."""

    function_id: str | None = None
    """A function's immutable id (its current version), or a function version's id (exactly it)."""
    package: str | None = None
    """A package id or name."""
    package_selector: str | None = None
    function: str | None = None
    function_selector: str | None = None

    @classmethod
    def by_function_id(cls, function_id: str) -> ExecuteAddress:
        return cls(function_id=function_id)

    @classmethod
    def by_path(cls, package_segment: str, function_segment: str) -> ExecuteAddress:
        package, package_selector = split_selector(package_segment)
        function, function_selector = split_selector(function_segment)
        if not package or not function or package_selector == "" or function_selector == "":
            raise InvalidRequest(
                "expected /packages/{package}[@version]/functions/{name}[@version]"
            )
        if package_selector is not None and function_selector is not None:
            raise InvalidRequest(
                "name a package version or a function version, not both "
                f"({package_segment}/functions/{function_segment})"
            )
        return cls(None, package, package_selector, function, function_selector)


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
