"""Extract nodes: globbing a bundle at run time, and what is known of it at deploy time.

The bundle is the `outputs` object of the source node. Its keys are the paths to every value
in that object, descending through nested objects (not lists) and joined with `/`; an
intermediate object is a key too, so `reactions` picks the whole object and `reactions/*`
its members. Patterns use `fnmatch.fnmatchcase` (case-sensitive on every platform, and `*`
crosses `/`). "Key order" is the sorted order of the full key strings: outputs live in JSON
columns, and PostgreSQL's jsonb does not keep insertion order, so sorted order is the only
one that survives storage.

At deploy time the same keys are derived from the declared output types: structs (and the
struct-shaped Torsor) are descended field by field; below a `dict[str, T]` output the keys
are only known at run time, so such a region is "dynamic" and contributes the types found
anywhere inside T when the pattern can reach into it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from calcgraph.domain.types.catalog import TORSOR_FIELDS
from calcgraph.domain.types.expr import DictOf, Named, Struct, TypeExpr

SEPARATOR = "/"

# --- run time -------------------------------------------------------------------------------


def _walk(prefix: str, value: object) -> Iterator[tuple[str, Any]]:
    yield prefix, value
    if isinstance(value, Mapping):
        for key, sub in value.items():
            yield from _walk(f"{prefix}{SEPARATOR}{key}", sub)


def bundle_items(outputs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every (key, value) of the bundle, in key order."""
    items: list[tuple[str, Any]] = []
    for key, value in outputs.items():
        items.extend(_walk(str(key), value))
    items.sort(key=lambda item: item[0])
    return items


def pick(outputs: Mapping[str, Any], pattern: str) -> tuple[bool, Any]:
    """(True, value of the first matching key) or (False, None) when nothing matches."""
    for key, value in bundle_items(outputs):
        if fnmatchcase(key, pattern):
            return True, value
    return False, None


def filter_bundle(outputs: Mapping[str, Any], pattern: str) -> dict[str, Any]:
    """Every matching key with its value, in key order; possibly empty."""
    return {key: value for key, value in bundle_items(outputs) if fnmatchcase(key, pattern)}


# --- deploy time ----------------------------------------------------------------------------


def _glob_tokens(pattern: str) -> list[str]:
    """Split a glob into `*` and single-character globs (a literal, `?` or a `[...]` set)."""
    tokens: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[":
            # Same bracket rules as fnmatch.translate: `!` negates, a leading `]` is literal,
            # and an unclosed `[` is a literal bracket.
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 1
            if j < len(pattern):
                tokens.append(pattern[i : j + 1])
                i = j + 1
                continue
            tokens.append("[[]")
        else:
            tokens.append(char if char in "*?" else _literal(char))
        i += 1
    return tokens


def _literal(char: str) -> str:
    return "[" + char + "]" if char in "[]!" else char


def may_match_below(pattern: str, prefix: str) -> bool:
    """Can `pattern` match some key that starts with `prefix`?

    Runs the glob as a non-deterministic automaton over the prefix: if any state survives,
    the rest of the pattern can always be completed (a `*` takes anything, a literal or a
    set takes one character; an unsatisfiable set is rare enough to be optimistic about).
    """
    tokens = _glob_tokens(pattern)

    def closure(states: set[int]) -> set[int]:
        out = set(states)
        stack = list(states)
        while stack:
            state = stack.pop()
            if state < len(tokens) and tokens[state] == "*" and state + 1 not in out:
                out.add(state + 1)
                stack.append(state + 1)
        return out

    states = closure({0})
    for char in prefix:
        after: set[int] = set()
        for state in states:
            if state >= len(tokens):
                continue
            token = tokens[state]
            if token == "*":
                after.add(state)
            elif fnmatchcase(char, token):
                after.add(state + 1)
        states = closure(after)
        if not states:
            return False
    return True


def _fields(expr: TypeExpr) -> tuple[tuple[str, TypeExpr], ...] | None:
    if isinstance(expr, Struct):
        return expr.fields
    if isinstance(expr, Named) and expr.name == "Torsor":
        return tuple((k, Named(v)) for k, v in TORSOR_FIELDS.items())
    return None


def _subtree_types(expr: TypeExpr) -> Iterator[TypeExpr]:
    yield expr
    fields = _fields(expr)
    if fields is not None:
        for _, sub in fields:
            yield from _subtree_types(sub)
    elif isinstance(expr, DictOf):
        yield from _subtree_types(expr.value)


@dataclass(frozen=True)
class Shape:
    """What is known before run time of a node's outputs object, and of it as a bundle."""

    ports: Mapping[str, tuple[TypeExpr, ...]] = field(default_factory=dict)
    """Output ports to their candidate types (several when a pick could yield either)."""
    open_ports: Mapping[str, tuple[TypeExpr, ...]] = field(default_factory=dict)
    """Prefix of output ports only known at run time (a filter into a dict) to their types."""
    keys: Mapping[str, tuple[TypeExpr, ...]] = field(default_factory=dict)
    """Bundle keys known before run time."""
    dynamic: Mapping[str, tuple[TypeExpr, ...]] = field(default_factory=dict)
    """Prefix (ending in `/`) of bundle keys only known at run time, to every type below."""

    @staticmethod
    def of(
        ports: Mapping[str, Sequence[TypeExpr]],
        open_ports: Mapping[str, Sequence[TypeExpr]] | None = None,
    ) -> Shape:
        keys: dict[str, list[TypeExpr]] = {}
        dynamic: dict[str, list[TypeExpr]] = {}

        def add(key: str, expr: TypeExpr) -> None:
            keys.setdefault(key, []).append(expr)
            fields = _fields(expr)
            if fields is not None:
                for name, sub in fields:
                    add(f"{key}{SEPARATOR}{name}", sub)
            elif isinstance(expr, DictOf):
                dynamic.setdefault(key + SEPARATOR, []).extend(_subtree_types(expr.value))

        for port, exprs in ports.items():
            for expr in exprs:
                add(port, expr)
        for prefix, exprs in (open_ports or {}).items():
            for expr in exprs:
                dynamic.setdefault(prefix, []).extend(_subtree_types(expr))
        return Shape(_dedupe(ports), _dedupe(open_ports or {}), _dedupe(keys), _dedupe(dynamic))

    def matching(
        self, pattern: str
    ) -> tuple[dict[str, tuple[TypeExpr, ...]], dict[str, tuple[TypeExpr, ...]]]:
        """Bundle keys the pattern matches, and dynamic regions it may reach into."""
        static = {k: v for k, v in sorted(self.keys.items()) if fnmatchcase(k, pattern)}
        reach = {p: v for p, v in self.dynamic.items() if may_match_below(pattern, p)}
        return static, reach

    def port_types(self, port: str) -> tuple[TypeExpr, ...] | None:
        """Candidate types of one output port, or None when the node never outputs it."""
        if port in self.ports:
            return self.ports[port]
        found = [
            t
            for prefix, types in self.open_ports.items()
            if port.startswith(prefix) and len(port) > len(prefix)
            for t in types
        ]
        return tuple(dict.fromkeys(found)) or None


def _dedupe(groups: Mapping[str, Sequence[TypeExpr]]) -> dict[str, tuple[TypeExpr, ...]]:
    return {key: tuple(dict.fromkeys(types)) for key, types in groups.items()}


def pick_shape(source: Shape, pattern: str) -> Shape | None:
    """The shape of a pick node's outputs `{value: ...}`; None when it can never match."""
    static, reach = source.matching(pattern)
    found = [t for types in static.values() for t in types]
    found += [t for types in reach.values() for t in types]
    if not found:
        return None
    return Shape.of({"value": found})


def filter_shape(source: Shape, pattern: str) -> Shape:
    """A filter node outputs one port per matched key; dynamic where the source is."""
    static, reach = source.matching(pattern)
    return Shape.of(static, reach)
