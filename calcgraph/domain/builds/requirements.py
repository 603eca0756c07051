"""Rules for the requirement list of a submitted function: PEP 508 names from the index only.

Each item is one requirement, not a line of a pip requirements file: pip options, URLs and local
paths would let a submission choose where code comes from, which the build must decide alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from calcgraph.domain.errors import FieldError

_ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar")
_SHOWN_CHARS = 80


@dataclass(frozen=True)
class RequirementsCheck:
    """The parsed requirements when every item is acceptable, and the refusals otherwise."""

    requirements: tuple[Requirement, ...]
    errors: tuple[FieldError, ...]


def check_requirements(items: Sequence[object], limit: int) -> RequirementsCheck:
    """Check the count against `limit` (refused at `limit` or more) and every item on its own.

    Locations are `("body", "requirements", index)` with the index counted from 0, as in the
    JSON array the client sent.
    """
    errors: list[FieldError] = []
    if len(items) >= limit:
        errors.append(
            FieldError(
                ("body", "requirements"),
                f"rule dependency-count: {len(items)} requirements; fewer than {limit} are allowed",
            )
        )
    parsed: list[Requirement] = []
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        requirement, problem = _parse_item(index, item)
        if problem is not None:
            errors.append(FieldError(("body", "requirements", index), problem))
            continue
        assert requirement is not None
        name = canonicalize_name(requirement.name)
        if name in first_seen:
            errors.append(
                FieldError(
                    ("body", "requirements", index),
                    f"rule requirement-duplicate: requirements[{index}] {_shown(str(item))} "
                    f"names {name} again, already at requirements[{first_seen[name]}]; "
                    "combine them into one requirement",
                )
            )
            continue
        first_seen[name] = index
        parsed.append(requirement)
    return RequirementsCheck(tuple(parsed), tuple(errors))


def _parse_item(index: int, item: object) -> tuple[Requirement | None, str | None]:
    where = f"requirements[{index}]"
    if not isinstance(item, str):
        return None, f"rule requirement-syntax: {where} is not a string"
    text = item.strip()
    if not text:
        return None, f"rule requirement-syntax: {where} is empty"
    if "\n" in text or "\r" in text:
        # One item is one line of the requirements file the build writes: a line break would
        # smuggle a second line (a pip option) past every other rule.
        return None, f"rule requirement-syntax: {where} {_shown(text)} holds a line break"
    if text.startswith("-"):
        return None, (
            f"rule requirement-source: {where} {_shown(text)} is a pip option; "
            "only requirement specifiers such as 'name==1.2' are accepted"
        )
    location = (
        f"rule requirement-source: {where} {_shown(text)} is a URL or a local path; "
        "packages come from the package index only"
    )
    # Checked before parsing too: 'pkg-1.0-py3-none-any.whl' is a valid project name to
    # packaging, but pip installs it as a file.
    if "@" not in text and _looks_like_location(text):
        return None, location
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        if _looks_like_location(text):
            return None, location
        reason = str(exc).splitlines()[0] if str(exc) else "not a PEP 508 requirement"
        return None, f"rule requirement-syntax: {where} {_shown(text)}: {reason}"
    if requirement.url:
        return None, (
            f"rule requirement-source: {where} {_shown(text)} is a direct reference; "
            "packages come from the package index only"
        )
    return requirement, None


def _looks_like_location(text: str) -> bool:
    lowered = text.lower()
    return (
        "://" in lowered
        or lowered.startswith((".", "/", "~", "\\"))
        or (len(lowered) > 2 and lowered[1] == ":" and lowered[2] in "/\\")
        or lowered.endswith(_ARCHIVE_SUFFIXES)
    )


def _shown(text: str) -> str:
    """The item quoted for a message, cut short so that a huge item cannot flood the answer."""
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return repr(text)
