"""How a submitted function becomes a package deployment, and how a build is reported.

Pure rules (no I/O). Decisions where the specification and contract are silent:

- `POST /functions` with name N builds into a package also named N, owned by the caller, that
  holds exactly one function N; each successful build deploys a new package version (PATCH
  bump of the newest, `1.0.0` first). A package named N that was published through
  `POST /packages` with other functions is not taken over: 409.
- The function version follows the auto rule of the specification, with the requirements
  counted as code: the same code checksum and the same requirements keep the version
  (`unchanged`), anything else bumps its PATCH (`updated`); the first build is `1.0.0` (`new`).
  Requirements count because the built artifact is what runs: a new dependency set under an
  unchanged immutable version would change what that version computes.
- The package files of a deployment are `main.py` and `requirements.txt` (one normalised
  requirement per line), so execution stages both and a later build can compare requirements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from calcgraph.domain.packages.semver_rules import latest_version, parse_version

CODE_FILE = "main.py"
REQUIREMENTS_FILE = "requirements.txt"
FIRST_VERSION = "1.0.0"


@dataclass(frozen=True)
class PreviousBuild:
    """What the function's current version was built from."""

    version: str
    code_checksum: str
    requirements: tuple[str, ...]


def requirements_text(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def parse_requirements_text(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def bump_patch(version: str) -> str:
    parsed = parse_version(version)
    return f"{parsed.major}.{parsed.minor}.{parsed.patch + 1}"


def next_function_version(
    previous: PreviousBuild | None, code_checksum: str, requirements: Sequence[str]
) -> tuple[str, str]:
    """`(version, status)` of the function after this build: `new`, `unchanged`, `updated`."""
    if previous is None:
        return FIRST_VERSION, "new"
    if previous.code_checksum == code_checksum and previous.requirements == tuple(requirements):
        return previous.version, "unchanged"
    return bump_patch(previous.version), "updated"


def next_package_version(existing: Sequence[str]) -> str:
    newest = latest_version(existing)
    return FIRST_VERSION if newest is None else bump_patch(newest)


def submission_manifest(
    name: str,
    package_version: str,
    function_version: str,
    handler: str,
    inputs: Mapping[str, Any] | None,
    outputs: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The manifest of the one-function package (contract 7 keys); `manual` versioning, since
    the version was decided above by the rule that also counts requirements."""
    function: dict[str, Any] = {"handler": handler, "version": function_version}
    if inputs is not None:
        function["inputs"] = dict(inputs)
    if outputs is not None:
        function["outputs"] = dict(outputs)
    return {
        "kind": "package",
        "version": 1,
        "package": {
            "name": name,
            "version": package_version,
            "versioning_strategy": "manual",
        },
        "functions": {name: function},
    }


def format_size(size_bytes: int) -> str:
    """Decimal units, as the specification's example `48.3 MB` reads."""
    value = float(size_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    return f"{seconds:.1f}s"
