"""Which nodes of a re-run from failure start `success` with the original run's results
(contract section 10). Pure.

A function node is reused when the original run has a node of the same key that succeeded, on
the same function version, and the node's inputs resolve to the same values in both runs (the
run inputs it reads, and the outputs of its upstream nodes, which must be reused themselves:
a node whose upstream runs again waits for it and runs too). An extract node whose source was
reused is evaluated here, by the tick's rule, so the nodes it feeds can be reused as well.
Reused nodes keep the original node's job id, outputs and times, and say `reused: true`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcgraph.domain.jobs.cache_key import canonical_json
from calcgraph.domain.runs.bindings import InputResolutionError, resolve_inputs
from calcgraph.domain.runs.state import NodeState
from calcgraph.domain.workflows.extract import filter_bundle, pick
from calcgraph.domain.workflows.planner import Plan, PlanNode


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return canonical_json(dict(a)) == canonical_json(dict(b))


def _extract(node: PlanNode, states: Mapping[str, NodeState]) -> NodeState | None:
    assert node.from_node_key is not None
    assert node.pattern is not None
    source = states.get(node.from_node_key)
    if source is None or source.status != "success":
        return None
    bundle = source.outputs or {}
    if node.mode == "filter":
        outputs = filter_bundle(bundle, node.pattern)
    else:
        found, value = pick(bundle, node.pattern)
        if not found:
            return None  # left to the tick, which fails it as it would
        outputs = {"value": value}
    return NodeState(
        "success",
        outputs=outputs,
        attempt=1,
        started_at=source.finished_at,
        finished_at=source.finished_at,
    )


def reused_states(
    plan: Plan,
    inputs: Mapping[str, Any],
    original_plan: Plan,
    original_states: Mapping[str, NodeState],
    original_inputs: Mapping[str, Any],
) -> dict[str, NodeState]:
    """The nodes of the new run (`plan`, resolved `inputs`) that start `success`."""
    states: dict[str, NodeState] = {}
    for key, node in plan.nodes.items():  # topological: upstream nodes first
        if any(up not in states for up in node.depends_on):
            continue
        if node.kind == "extract":
            evaluated = _extract(node, states)
            if evaluated is not None:
                states[key] = evaluated
            continue
        old = original_plan.nodes.get(key)
        before = original_states.get(key)
        if (
            old is None
            or before is None
            or old.kind != "function"
            or before.status != "success"
            or before.job_id is None
            or old.function_version_id is None
            or old.function_version_id != node.function_version_id
        ):
            continue
        try:
            now_in = resolve_inputs(node, states, inputs)
            then_in = resolve_inputs(old, original_states, original_inputs)
        except (InputResolutionError, KeyError):
            continue
        if not _same(now_in, then_in):
            continue
        states[key] = NodeState(
            "success",
            job_id=before.job_id,
            outputs=dict(before.outputs or {}),
            attempt=before.attempt,
            started_at=before.started_at,
            finished_at=before.finished_at,
            reused=True,
        )
    return states
