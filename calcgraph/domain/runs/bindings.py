"""A node's inputs, read through its bindings: the rule the tick submits by and a chain worker
resolves the next link by (`calcgraph.domain.runs.chains`). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.workflows.planner import PlanNode


class InputResolutionError(Exception):
    """A binding whose source value does not exist (yet): the node cannot be submitted."""


class Refused(Exception):
    """The run's owner may not execute the node's function version now."""

    def __init__(self, node: PlanNode) -> None:
        super().__init__(
            f"the run's owner may no longer execute {node.function!r}: its package is not "
            "visible to them now"
        )


def resolve_inputs(
    node: PlanNode, states: Mapping[str, NodeState], inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of a function node, read through its bindings.

    Input nodes are read verbatim from the run's inputs (the caller passes them already in
    SI); edge and chain bindings read the upstream node's outputs.
    """
    resolved: dict[str, Any] = {}
    for binding in node.bindings:
        key = binding.upstream
        if binding.source == "input_node":
            if key not in inputs:
                raise InputResolutionError(f"port {binding.port!r}: run input {key!r} is missing")
            resolved[binding.port] = inputs[key]
            continue
        outputs = states[key].outputs or {}
        if binding.from_port not in outputs:
            raise InputResolutionError(
                f"port {binding.port!r}: node {key!r} has no output {binding.from_port!r}"
            )
        resolved[binding.port] = outputs[binding.from_port]
    return resolved
