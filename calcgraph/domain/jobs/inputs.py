"""Inputs of an execute call against the function's typed input ports. Pure.

A typed function's inputs are checked port by port with the type catalog (`values.normalize`):
every problem is reported at once, located at `["body", "inputs", port, ...]`, unknown ports and
missing required ports included. Quantities come back in SI (the resolved inputs the handler
receives and the result cache keys on). An untyped function takes any JSON object verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.types.expr import TypeExprError, from_json
from calcgraph.domain.types.values import normalize

LOC = ("body", "inputs")


def resolve_inputs(inputs: object, inputs_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The SI inputs for `inputs`, or ValidationError listing every port problem."""
    if not isinstance(inputs, Mapping):
        raise ValidationError(
            "inputs must be an object keyed by input port name",
            [FieldError(LOC, "expected an object keyed by input port name")],
        )
    if inputs_schema is None:
        return dict(inputs)
    errors: list[FieldError] = []
    resolved: dict[str, Any] = {}
    for port in inputs:
        if port not in inputs_schema:
            known = ", ".join(sorted(inputs_schema)) or "none"
            errors.append(FieldError((*LOC, str(port)), f"unknown input port (ports: {known})"))
    for port, spec in inputs_schema.items():
        loc = (*LOC, port)
        if port not in inputs:
            if _required(spec):
                errors.append(FieldError(loc, "required input is missing"))
            continue
        try:
            expr = from_json(spec.get("type") if isinstance(spec, Mapping) else spec)
        except TypeExprError as exc:
            # A manifest check refuses these at deploy time; an old row may still hold one.
            errors.append(FieldError(loc, f"the port's declared type is invalid: {exc}"))
            continue
        try:
            resolved[port] = normalize(inputs[port], expr, loc)
        except ValidationError as exc:
            errors.extend(exc.errors)
    refuse_mismatches(errors, "the function's typed inputs")
    return resolved


def refuse_mismatches(errors: list[FieldError], expected: str) -> None:
    """Every problem of the inputs at once, the message naming each input that has one (the
    third item of each location, after `body`, `inputs`)."""
    if errors:
        names = sorted({str(e.loc[2]) for e in errors if len(e.loc) > 2})
        raise ValidationError(f"inputs do not match {expected} ({', '.join(names)})", errors)


def _required(spec: object) -> bool:
    if isinstance(spec, Mapping):
        return spec.get("required", True) is not False
    return True


def output_ports(outputs_schema: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The ports a typed function must return (the sandbox checks them); none when untyped."""
    return tuple(outputs_schema) if outputs_schema else ()
