"""The package manifest `calcgraph.yaml` (spec: Function manifest, Versioning 6; contract 7).

`parse_manifest` checks every key and reports every problem in one `ValidationError`, each
located by its key path, e.g. `("functions", "cantilever", "inputs", "length", "type")`.
Unknown keys are refused so that a typo never passes as an ignored key.

Typed I/O rule: a function is *typed* when it declares both an `inputs` and an `outputs`
block (`inputs: {}` is a typed function without inputs; `outputs` needs at least one port).
A function declaring neither is untyped: it deploys and runs alone but cannot be a workflow
node. Declaring only one of the two blocks is refused, as it is almost always a mistake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.manifest_functions import (
    FunctionSpec,
    Port,
    function_as_json,
    parse_function,
    parse_handler,
)
from calcgraph.domain.packages.manifest_json import package_as_json
from calcgraph.domain.packages.manifest_package import (
    FUNCTION_NAME,
    PACKAGE_KEYS_OPTIONAL,
    PACKAGE_KEYS_REQUIRED,
    PACKAGE_NAME,
    Canary,
    Change,
    Compatibility,
    Deployment,
    PackageSection,
    Release,
    Strategy,
    SuccessCriteria,
    parse_package_section,
)
from calcgraph.domain.packages.manifest_reader import Loc, Problems, describe, load_yaml

__all__ = [
    "MANIFEST_FILE",
    "Canary",
    "Change",
    "Compatibility",
    "Deployment",
    "FunctionSpec",
    "Manifest",
    "PackageSection",
    "Port",
    "Release",
    "Strategy",
    "SuccessCriteria",
    "parse_handler",
    "parse_manifest",
]

MANIFEST_FILE = "calcgraph.yaml"
MANIFEST_FORMAT_VERSIONS = (1,)


@dataclass(frozen=True)
class Manifest:
    format_version: int
    package: PackageSection
    functions: Mapping[str, FunctionSpec] = field(default_factory=dict)
    kind: Literal["package"] = "package"

    def strategy_of(self, function: str) -> Strategy:
        return self.functions[function].versioning or self.package.versioning_strategy

    def as_json(self) -> dict[str, Any]:
        """Normalised, JSON-safe form for `PackageVersion.manifest`."""
        return {
            "kind": self.kind,
            "version": self.format_version,
            "package": package_as_json(self.package),
            "functions": {name: function_as_json(f) for name, f in self.functions.items()},
        }


def _package_name(
    p: Problems, raw: dict[str, object], package: dict[str, object] | None
) -> str | None:
    """The spec names the package at top level (`name`) and under `package.name`: accept
    either; when both are given they must agree."""
    names: list[tuple[Loc, object]] = []
    if "name" in raw:
        names.append((("name",), raw["name"]))
    if package is not None and "name" in package:
        names.append((("package", "name"), package["name"]))
    if not names:
        if package is not None:
            p.add(("package", "name"), "is required")
        return None
    clean: list[str] = []
    for loc, value in names:
        text = p.string(value, loc, max_length=100)
        if text is not None and not PACKAGE_NAME.match(text):
            p.add(loc, f"{text!r} is not a package name: letters, digits, '.', '_', '-'")
        elif text is not None:
            clean.append(text)
    if len(clean) == 2 and clean[0] != clean[1]:
        p.add(("name",), f"{clean[0]!r} differs from package.name {clean[1]!r}")
        return None
    return clean[0] if len(clean) == len(names) else None


def parse_manifest(source: str | bytes | Mapping[str, object]) -> Manifest:
    """Parse and check a manifest given as YAML text or as an already decoded mapping (JSON).

    Raises `ValidationError` listing every problem with its key path; never anything else.
    """
    data = load_yaml(source) if isinstance(source, str | bytes) else source
    p = Problems()
    if data is None:
        p.add((), "the manifest is empty")
        p.raise_if_any()
    try:
        raw = p.mapping(
            data,
            (),
            required=("kind", "version", "package", "functions"),
            optional=("name",),
        )
        manifest = _parse(p, raw) if raw is not None else None
    except RecursionError:
        p.add((), "the manifest nests too deeply")
        manifest = None
    p.raise_if_any()
    if manifest is None:  # every path that yields None has recorded a problem
        raise ValidationError("manifest is invalid")
    return manifest


def _declared(raw: dict[str, object]) -> frozenset[str] | None:
    functions = raw.get("functions")
    if not isinstance(functions, Mapping) or not functions:
        return None
    return frozenset(k for k in functions if isinstance(k, str))


def _parse(p: Problems, raw: dict[str, object]) -> Manifest | None:
    if "kind" in raw:
        p.choice(raw["kind"], ("kind",), ("package",))
    format_version = None
    if "version" in raw:
        value = raw["version"]
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value in (MANIFEST_FORMAT_VERSIONS)
        ):
            format_version = value
        else:
            p.add(
                ("version",),
                f"is the manifest format version and must be 1, not {describe(raw['version'])}"
                " (the package version goes in package.version)",
            )
    package_raw = (
        p.mapping(
            raw["package"],
            ("package",),
            required=PACKAGE_KEYS_REQUIRED,
            optional=PACKAGE_KEYS_OPTIONAL,
        )
        if "package" in raw
        else None
    )
    name = _package_name(p, raw, package_raw)
    package = (
        parse_package_section(p, package_raw, ("package",), name, _declared(raw))
        if package_raw is not None
        else None
    )
    functions: dict[str, FunctionSpec] = {}
    if "functions" in raw:
        entries = p.entries(raw["functions"], ("functions",), what="function names")
        if isinstance(raw["functions"], Mapping) and not raw["functions"]:
            p.add(("functions",), "a package needs at least one function")
        for fname, value in entries:
            if not FUNCTION_NAME.match(fname):
                p.add(
                    ("functions", fname),
                    "is not a function name: a letter or '_' then letters, digits, '_', '-'",
                )
                continue
            spec = parse_function(p, fname, value, ("functions", fname))
            if spec is not None:
                functions[fname] = spec
    if package is None or format_version is None:
        return None
    return Manifest(format_version=format_version, package=package, functions=functions)
