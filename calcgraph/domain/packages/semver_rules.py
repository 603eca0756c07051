"""Semantic versions and version ranges of packages and functions.

Parsing and precedence (pre-release ordering included) come from the `semver` library; this
module only fixes the range syntax of `package.dependencies` and `compatibility.compatible_with`:

- comparators joined by commas, all of which must hold: `>=1.2.0,<2.0.0`;
  operators `>=`, `>`, `<=`, `<`, `==`, `=` (same as `==`), `!=`; a bare version means `==`;
  `>=` and `<` accept a partial version (`>=1.2,<2`), padded with zeros, which is exact for
  them; the others need a full version, as padding would change their meaning;
- `^1.2.3` (same MAJOR, or same MINOR while MAJOR is 0, npm style), `~1.2.3` (same MINOR);
  `^` and `~` accept a partial version (`^1.2`, `~1`);
- `*` matches every version.

Pre-releases match by plain precedence (`>=1.0.0` does not match `1.0.0-rc.1`, `>=0.9.0` does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import semver

Version = semver.Version

_OPERATORS = (">=", "<=", "==", "!=", ">", "<", "=")
_TAG = re.compile(r"^v(?P<version>\d.*)$")


def parse_version(text: object) -> Version:
    """A full MAJOR.MINOR.PATCH[-PRE][+BUILD] version; ValueError with a readable message."""
    if not isinstance(text, str):
        raise ValueError(
            f"a version is a string such as '1.2.0', not {type(text).__name__} {text!r}"
        )
    try:
        return Version.parse(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH with optional "
            "-PRERELEASE and +BUILD, e.g. '1.2.0' or '1.3.0-rc.1')"
        ) from None


def is_stable(version: str) -> bool:
    """Stable means no pre-release part; build metadata does not count."""
    return parse_version(version).prerelease is None


def same_version(a: str, b: str) -> bool:
    """Equal precedence: `1.0.0+a` and `1.0.0+b` are the same version for the platform."""
    return parse_version(a).compare(b) == 0


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Ascending semver precedence."""
    return sorted(versions, key=parse_version)


def latest_version(versions: Iterable[str]) -> str | None:
    """The highest stable version; when no stable version exists, the highest pre-release.

    A release candidate published after 1.0.0 must not become what an unpinned call runs,
    but a package that has only ever published pre-releases still needs a latest one.
    """
    ordered = sort_versions(versions)
    stable = [v for v in ordered if is_stable(v)]
    if stable:
        return stable[-1]
    return ordered[-1] if ordered else None


def version_from_tag(tag: str) -> str | None:
    """The version a `v<MAJOR.MINOR.PATCH>[-pre]` tag names, or None for another tag."""
    match = _TAG.match(tag)
    if match is None:
        return None
    try:
        return str(Version.parse(match.group("version")))
    except ValueError:
        return None


@dataclass(frozen=True)
class Comparator:
    operator: str
    version: Version

    def matches(self, version: Version) -> bool:
        # semver's `match` takes the comparison as text; "==" is its spelling of equality.
        return version.match(f"{self.operator}{self.version}")


@dataclass(frozen=True)
class VersionRange:
    """A parsed range; `text` is kept verbatim for storage and messages."""

    text: str
    comparators: tuple[Comparator, ...]

    def contains(self, version: str | Version) -> bool:
        parsed = version if isinstance(version, Version) else parse_version(version)
        return all(c.matches(parsed) for c in self.comparators)

    def __str__(self) -> str:
        return self.text


def _partial(text: str) -> tuple[Version, int]:
    """A possibly partial version for `^`/`~`, and how many of its parts were written."""
    core = text.split("-", 1)[0].split("+", 1)[0]
    parts = len(core.split("."))
    try:
        return Version.parse(text, optional_minor_and_patch=True), parts
    except ValueError:
        raise ValueError(f"{text!r} is not a version") from None


def _caret(text: str) -> tuple[Comparator, ...]:
    low, parts = _partial(text)
    if low.major > 0 or parts == 1:
        high = low.bump_major()
    elif low.minor > 0 or parts == 2:
        high = low.bump_minor()
    else:
        high = low.bump_patch()
    return Comparator(">=", low), Comparator("<", Version(high.major, high.minor, high.patch))


def _tilde(text: str) -> tuple[Comparator, ...]:
    low, parts = _partial(text)
    high = low.bump_major() if parts == 1 else low.bump_minor()
    return Comparator(">=", low), Comparator("<", Version(high.major, high.minor, high.patch))


def _comparator(text: str) -> tuple[Comparator, ...]:
    if text == "*":
        return ()
    if text.startswith("^"):
        return _caret(text[1:].strip())
    if text.startswith("~"):
        return _tilde(text[1:].strip())
    for operator in _OPERATORS:
        if text.startswith(operator):
            rest = text[len(operator) :].strip()
            version = _partial(rest)[0] if operator in (">=", "<") else parse_version(rest)
            return (Comparator("==" if operator == "=" else operator, version),)
    return (Comparator("==", parse_version(text)),)


def parse_range(text: object) -> VersionRange:
    """Parse a version range (syntax in the module docstring); ValueError names the problem."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        raise ValueError(
            f"a version range is a string such as '>=1.2.0,<2.0.0' or '^1.2', not {text!r} "
            "(quote it in YAML)"
        )
    if not isinstance(text, str):
        raise ValueError(f"a version range is a string, not {type(text).__name__}")
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise ValueError(f"{text!r} is not a version range: an empty comparator")
    comparators: list[Comparator] = []
    for part in parts:
        try:
            comparators.extend(_comparator(part))
        except ValueError as exc:
            raise ValueError(
                f"{text!r} is not a version range ({exc}); write e.g. '>=1.2.0,<2.0.0', "
                "'^1.2', '~1.2.3', '1.2.3' or '*'"
            ) from None
    return VersionRange(text.strip(), tuple(comparators))
