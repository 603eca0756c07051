"""Differences between two typed interfaces of a function, judged with the type rules
(contract 11, Breaking changes). Pure.

Breaking, for a caller of the old version:
- a removed input or output (or the typed I/O dropped altogether, or the whole function);
- a new required input, or an optional input that became required;
- an input that no longer accepts the old type (`check(old, new)` refused);
- an output whose new type cannot connect to its old type (`check(new, old)` refused).
Everything else (an optional input or an output added, a type changed along its chain) is a
compatible change. `packages diff` shows both kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from calcgraph.domain.types.compat import check
from calcgraph.domain.types.expr import TypeExpr, TypeExprError, from_json

ChangeKind = Literal[
    "function_removed",
    "function_added",
    "typed_io_removed",
    "typed_io_added",
    "input_removed",
    "input_added",
    "input_required",
    "input_optional",
    "input_type",
    "output_removed",
    "output_added",
    "output_type",
]
Schema = Mapping[str, Any]


@dataclass(frozen=True)
class InterfaceChange:
    function: str
    kind: ChangeKind
    breaking: bool
    reason: str
    port: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"function": self.function, "change": self.kind}
        if self.port is not None:
            out["port"] = self.port
        out["breaking"] = self.breaking
        out["reason"] = self.reason
        return out


def _type(spec: object) -> TypeExpr | None:
    raw = spec.get("type") if isinstance(spec, Mapping) else spec
    try:
        return from_json(raw)
    except TypeExprError:
        return None


def _text(spec: object) -> str:
    raw = spec.get("type") if isinstance(spec, Mapping) else spec
    return raw if isinstance(raw, str) else str(raw)


def _required(spec: object) -> bool:
    return not (isinstance(spec, Mapping) and spec.get("required") is False)


def _connects(source: object, target: object) -> tuple[bool, str]:
    s, t = _type(source), _type(target)
    if s is None or t is None:
        return _text(source) == _text(target), "a type that does not parse"
    verdict = check(s, t)
    return verdict.allowed, verdict.reason


Side = Literal["input", "output"]
# A side's kinds of change: removed, retyped.
_KINDS: dict[Side, tuple[ChangeKind, ChangeKind]] = {
    "input": ("input_removed", "input_type"),
    "output": ("output_removed", "output_type"),
}


def _retyped(name: str, side: Side, port: str, spec: object, after: object) -> InterfaceChange:
    """An input must still accept what callers sent (old into new); an output must still
    connect where the old one did (new into old)."""
    was, now = _text(spec), _text(after)
    if side == "input":
        ok, why = _connects(spec, after)
        verdict = "still accepts" if ok else "no longer accepts"
        effect = f"it {verdict} {was}"
    else:
        ok, why = _connects(after, spec)
        verdict = "connects" if ok else "cannot connect"
        effect = f"the new type {verdict} to the old"
    reason = f"{side} {port!r} changed type {was} -> {now}: {effect} ({why})"
    return InterfaceChange(name, _KINDS[side][1], not ok, reason, port)


def _requirement(name: str, port: str, spec: object, after: object) -> list[InterfaceChange]:
    if _required(after) and not _required(spec):
        return [
            InterfaceChange(name, "input_required", True, f"input {port!r} became required", port)
        ]
    if _required(spec) and not _required(after):
        return [
            InterfaceChange(name, "input_optional", False, f"input {port!r} became optional", port)
        ]
    return []


def _added(name: str, side: Side, port: str, spec: object) -> InterfaceChange:
    if side == "output":
        return InterfaceChange(name, "output_added", False, f"output {port!r} was added", port)
    required = _required(spec)
    how = "required" if required else "optional"
    reason = f"input {port!r} was added as {how}"
    return InterfaceChange(name, "input_added", required, reason, port)


def _ports(name: str, side: Side, old: Schema, new: Schema) -> list[InterfaceChange]:
    """Per old port: removed, or retyped and (inputs) required or optional; then the new ports."""
    changes: list[InterfaceChange] = []
    for port, spec in old.items():
        if port not in new:
            reason = f"{side} {port!r} was removed"
            changes.append(InterfaceChange(name, _KINDS[side][0], True, reason, port))
            continue
        after = new[port]
        if _text(spec) != _text(after):
            changes.append(_retyped(name, side, port, spec, after))
        if side == "input":
            changes.extend(_requirement(name, port, spec, after))
    changes.extend(_added(name, side, port, spec) for port, spec in new.items() if port not in old)
    return changes


def function_changes(
    name: str,
    old: tuple[Schema | None, Schema | None] | None,
    new: tuple[Schema | None, Schema | None] | None,
) -> list[InterfaceChange]:
    """What changed from `old` to `new`, each a pair (inputs schema, outputs schema); None:
    the function is absent on that side."""
    if old is None and new is None:
        return []
    if new is None:
        return [InterfaceChange(name, "function_removed", True, f"function {name!r} was removed")]
    if old is None:
        return [InterfaceChange(name, "function_added", False, f"function {name!r} was added")]
    old_in, old_out = old
    new_in, new_out = new
    if old_in is None or old_out is None:
        if new_in is None or new_out is None:
            return []
        return [
            InterfaceChange(name, "typed_io_added", False, "typed inputs and outputs were added")
        ]
    if new_in is None or new_out is None:
        return [
            InterfaceChange(name, "typed_io_removed", True, "typed inputs and outputs were removed")
        ]
    return [*_ports(name, "output", old_out, new_out), *_ports(name, "input", old_in, new_in)]


def breaking(changes: list[InterfaceChange]) -> list[InterfaceChange]:
    return [c for c in changes if c.breaking]
