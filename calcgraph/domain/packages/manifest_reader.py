"""Reading a manifest: safe YAML loading and a collector that checks values and keeps going.

Every check records a `FieldError` located by its key path and returns None instead of
raising, so one pass over a manifest reports every problem at once.
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Mapping
from typing import Any

import yaml

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.semver_rules import VersionRange, parse_range, parse_version

Loc = tuple[str | int, ...]

MAX_MANIFEST_BYTES = 1024 * 1024
MAX_VERSION_LENGTH = 100  # the width of the version columns


MAX_EXPANDED_NODES = 10_000
MAX_EXPANDED_BYTES = 2 * 1024 * 1024  # the default request body limit


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and bounds what aliases expand to.

    PyYAML keeps the last of two equal keys, which hides typos. Anchors and aliases are YAML
    1.1 as `yaml.safe_dump` writes them (it anchors a dict that appears twice), so they are
    read; but a small file of aliases of aliases expands into a huge structure once walked
    (the inline struct of a type is walked recursively), so the expansion is measured on the
    composed node graph, before anything is constructed, and refused past a bound.
    """

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _Expansion().measure(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable keys: the base class raises its own error below
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


class _AliasError(yaml.composer.ComposerError):
    """Aliases that expand too far or into themselves (the YAML itself is well formed)."""


class _Expansion:
    """Nodes and scalar bytes of a composed document with every alias expanded in place.

    Sizes are memoised per node, so the walk is linear in the file however much the aliases
    multiply; an alias inside the node it names (a cycle) is refused outright.
    """

    def __init__(self) -> None:
        self.sizes: dict[int, tuple[int, int]] = {}
        self.open: set[int] = set()

    def measure(self, root: yaml.Node) -> None:
        nodes, size = self.size(root)
        if nodes > MAX_EXPANDED_NODES or size > MAX_EXPANDED_BYTES:
            what = (
                f"{nodes} nodes (the limit is {MAX_EXPANDED_NODES})"
                if nodes > MAX_EXPANDED_NODES
                else f"{size} bytes (the limit is {MAX_EXPANDED_BYTES})"
            )
            raise _AliasError(
                None, None, f"with its aliases expanded the manifest has {what}", root.start_mark
            )

    def size(self, node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in self.sizes:
            return self.sizes[key]
        if key in self.open:
            raise _AliasError(
                None, None, "an alias refers to the node that contains it", node.start_mark
            )
        self.open.add(key)
        nodes, size = 1, 0
        if isinstance(node, yaml.ScalarNode):
            size = len(str(node.value).encode())
        else:
            children: list[yaml.Node] = (
                [part for pair in node.value for part in pair]
                if isinstance(node, yaml.MappingNode)
                else list(node.value)
            )
            for child in children:
                child_nodes, child_size = self.size(child)
                nodes, size = nodes + child_nodes, size + child_size
                if nodes > MAX_EXPANDED_NODES or size > MAX_EXPANDED_BYTES:
                    break  # already refused: no need to count further
        self.open.discard(key)
        self.sizes[key] = (nodes, size)
        return nodes, size


def _unshared(value: object) -> object:
    """The loaded document with every alias a copy of its own: checks that normalise a
    mapping in place must not change the other places an anchor was used."""
    if isinstance(value, dict):
        return {key: _unshared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unshared(item) for item in value]
    return value


# Dates stay strings: PyYAML's timestamp resolver raises a bare ValueError on `2024-13-01`,
# and a string is checked later with the key path of where it stands.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str | bytes) -> object:
    """Parse YAML text; every failure becomes one ValidationError with line and column."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_MANIFEST_BYTES:
        raise ValidationError(
            "manifest is invalid",
            [FieldError((), f"the manifest is {size} bytes; the limit is {MAX_MANIFEST_BYTES}")],
        )
    try:
        # A SafeLoader subclass: no arbitrary objects.
        return _unshared(yaml.load(text, Loader=_StrictLoader))
    except _AliasError as exc:
        message = f"YAML aliases refused: {exc.problem}"
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        message = f"YAML syntax error{where}: {problem}"
    except yaml.YAMLError as exc:
        message = f"YAML error: {exc}"
    except RecursionError:
        message = "YAML nests too deeply"
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot construct
        message = f"YAML value error: {exc}"
    except UnicodeDecodeError:
        message = "the manifest is not UTF-8 text"
    raise ValidationError("manifest is invalid", [FieldError((), message)])


def describe(value: object) -> str:
    """How a wrong value is named in a message: its kind and, when short, itself."""
    if value is None:
        return "null (an empty value)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "too big"
        return f"number {text}"
    if isinstance(value, str):
        return f"string {value!r}" if len(value) <= 60 else "a long string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dt.date):
        return f"date {value.isoformat()}"
    return type(value).__name__


class Problems:
    """Collects FieldErrors; each check returns the clean value or None."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, loc: Loc, msg: str) -> None:
        self.errors.append(FieldError(loc, msg))

    def raise_if_any(self, message: str = "manifest is invalid") -> None:
        if self.errors:
            raise ValidationError(message, self.errors)

    def mapping(
        self, value: object, loc: Loc, *, required: tuple[str, ...], optional: tuple[str, ...]
    ) -> dict[str, object] | None:
        """A mapping with known keys: unknown keys are refused so typos do not pass silently."""
        if not isinstance(value, Mapping):
            self.add(loc, f"must be a mapping of keys, not {describe(value)}")
            return None
        allowed = required + optional
        clean: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.add((*loc, str(key)), f"keys must be strings, not {describe(key)}")
            elif key in allowed:
                clean[key] = item
            else:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                self.add((*loc, key), f"unknown key; {hint}allowed: {', '.join(allowed)}")
        for key in required:
            if key not in value:
                self.add((*loc, key), "is required")
        return clean

    def entries(self, value: object, loc: Loc, *, what: str) -> list[tuple[str, object]]:
        """A mapping whose keys are names chosen by the author (functions, ports, versions)."""
        if not isinstance(value, Mapping):
            self.add(loc, f"must be a mapping of {what}, not {describe(value)}")
            return []
        result: list[tuple[str, object]] = []
        for key, item in value.items():
            if isinstance(key, str):
                result.append((key, item))
            else:
                hint = " (quote it in YAML)" if isinstance(key, int | float) else ""
                self.add((*loc, str(key)), f"{what} keys must be strings{hint}")
        return result

    def string(
        self, value: object, loc: Loc, *, max_length: int = 2000, allow_empty: bool = False
    ) -> str | None:
        if not isinstance(value, str):
            self.add(loc, f"must be a string, not {describe(value)}")
            return None
        if not allow_empty and not value.strip():
            self.add(loc, "must not be empty")
            return None
        if len(value) > max_length:
            self.add(loc, f"must be at most {max_length} characters, not {len(value)}")
            return None
        return value

    def boolean(self, value: object, loc: Loc) -> bool | None:
        if not isinstance(value, bool):
            self.add(loc, f"must be true or false, not {describe(value)}")
            return None
        return value

    def choice(self, value: object, loc: Loc, choices: tuple[str, ...]) -> str | None:
        if not isinstance(value, str) or value not in choices:
            self.add(loc, f"must be one of {', '.join(choices)}, not {describe(value)}")
            return None
        return value

    def number(
        self, value: object, loc: Loc, *, minimum: float, maximum: float | None = None
    ) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            self.add(loc, f"must be a number, not {describe(value)}")
            return None
        if value < minimum or (maximum is not None and value > maximum):
            bounds = (
                f"between {minimum:g} and {maximum:g}"
                if maximum is not None
                else (f"at least {minimum:g}")
            )
            self.add(loc, f"must be {bounds}, not {value!r}")
            return None
        return float(value)

    def versioned_text(
        self, value: object, loc: Loc, *, max_length: int
    ) -> str | Mapping[str, str] | None:
        """A text, or a mapping of version to text (changelogs, migration guides)."""
        if isinstance(value, str):
            return self.string(value, loc, max_length=max_length)
        if not isinstance(value, Mapping):
            self.add(loc, f"must be a text or a mapping of version to text, not {describe(value)}")
            return None
        texts: dict[str, str] = {}
        for key, text in self.entries(value, loc, what="versions"):
            version = self.version(key, (*loc, key))
            clean = self.string(text, (*loc, key), max_length=max_length)
            if version is not None and clean is not None:
                texts[version] = clean
        return texts

    def version(self, value: object, loc: Loc) -> str | None:
        """A semantic version, kept as written (trimmed) so build metadata survives."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            self.add(loc, f"must be a version string such as '1.2.0', not {value!r} (quote it)")
            return None
        try:
            parse_version(value)
        except ValueError as exc:
            self.add(loc, str(exc))
            return None
        assert isinstance(value, str)
        if len(value.strip()) > MAX_VERSION_LENGTH:
            self.add(loc, f"must be at most {MAX_VERSION_LENGTH} characters")
            return None
        return value.strip()

    def range(self, value: object, loc: Loc) -> VersionRange | None:
        try:
            return parse_range(value)
        except ValueError as exc:
            self.add(loc, str(exc))
            return None

    def date(self, value: object, loc: Loc) -> str | None:
        """An ISO date; YAML turns `2024-05-01` into a date object, JSON keeps it a string."""
        if isinstance(value, dt.datetime):
            return value.date().isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                pass
        self.add(loc, f"must be a date YYYY-MM-DD, not {describe(value)}")
        return None
