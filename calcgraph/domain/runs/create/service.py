"""Run creation: inputs checked, version and plan frozen (retry defaults included), every
function version a node will run visible to the caller, the run's rows written and its plan
and first states remembered. Planning (`prepare_run`) is pure and holds no session, so a large
run's creation reads what it needs in a short session, plans holding no pooled connection
(issue 27: a 12,000-node run creation held one 7.8 s), then writes (`insert_run`); a small
one is planned in its write transaction (`create_run`). A version's plan is the same for each
of its runs: made once per process (`planned_version`), the runs share it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.db.base import new_id, utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.access import policy
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import FieldError, PermissionDenied, ValidationError
from calcgraph.domain.events.service import held_for_last_statement, record_run
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.jobs.inputs import refuse_mismatches
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.domain.quotas.service import quota_service
from calcgraph.domain.runs import changes
from calcgraph.domain.runs.create.planned import PlannedVersion
from calcgraph.domain.runs.create.repository import RunCreationRepository
from calcgraph.domain.runs.memo import RunMemo
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.repository import RunRepository, run_view
from calcgraph.domain.runs.state import NodeState, initial_states
from calcgraph.domain.runs.views import RunView
from calcgraph.domain.spend import OFF_LOOP_NODES, off_loop
from calcgraph.domain.types.expr import TypeExprError, from_json
from calcgraph.domain.types.values import normalize
from calcgraph.domain.workflows.graph import InputNode, parse_graph
from calcgraph.domain.workflows.planner import Plan, plan
from calcgraph.domain.workflows.repository import WorkflowRepository, version_view
from calcgraph.domain.workflows.retry import from_dict as retry_from_dict
from calcgraph.domain.workflows.service import workflow_service
from calcgraph.domain.workflows.views import WorkflowVersionView, WorkflowView

Reuse = Callable[[Plan, Mapping[str, Any]], Mapping[str, NodeState]]
"""A re-run's rule: given the new run's plan and resolved inputs, the nodes that start
`success` with another run's results."""


def resolve_run_inputs(graph_inputs: Sequence[InputNode], inputs: object) -> dict[str, Any]:
    """The run's inputs in SI, or ValidationError naming every input that does not match."""
    loc = ("body", "inputs")
    if not isinstance(inputs, Mapping):
        raise ValidationError(
            "inputs must be an object keyed by input node_key",
            [FieldError(loc, "expected an object keyed by input node_key")],
        )
    errors: list[FieldError] = []
    known = {node.node_key: node for node in graph_inputs}
    for key in inputs:
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            errors.append(FieldError((*loc, str(key)), f"unknown input (inputs: {listed})"))
    resolved: dict[str, Any] = {}
    for key, node in known.items():
        if key not in inputs:
            errors.append(FieldError((*loc, key), "required input is missing"))
            continue
        try:
            expr = from_json(node.type_expr)
        except TypeExprError as exc:  # refused when the version was saved; an old row may hold one
            errors.append(FieldError((*loc, key), f"the input's type is invalid: {exc}"))
            continue
        try:
            resolved[key] = normalize(inputs[key], expr, (*loc, key))
        except ValidationError as exc:
            errors.extend(exc.errors)
    refuse_mismatches(errors, "the workflow's input nodes")
    return resolved


@dataclass(frozen=True)
class RunOrder:
    """What a run is created from: its workflow (the slug names it in messages and events),
    the version it runs (which names the workflow's id) and the inputs as given. `refresh`:
    its jobs are never answered from the result cache (contract section 10); `rerun_of`: the
    run it runs again."""

    slug: str
    version: WorkflowVersionView
    inputs: object
    refresh: bool = False
    rerun_of: str | None = None


@dataclass(frozen=True)
class PreparedRun:
    """What a run is written from, worked out holding no session: its resolved inputs, its
    plan (retry defaults frozen in), its first node states and the plan's snapshot."""

    resolved: dict[str, Any]
    frozen: Plan
    states: dict[str, NodeState]
    snapshot: dict[str, Any]
    written_snapshot: str
    """`snapshot` as JSON text, written once for its version (`PlannedVersion.written`)."""


async def retry_defaults(
    session: AsyncSession, memo: RunMemo, version: WorkflowVersionView
) -> dict[str, dict[str, Any]]:
    """The retry default of each function version `version` resolved to that declares one
    (a published version's manifest is never written again: remembered once read)."""
    ids = set(version.resolved_functions.values())
    defaults = memo.retry_defaults(ids)
    if defaults is None:
        defaults = await RunRepository.from_session(session).retry_defaults(ids)
        memo.remember_retry_defaults(ids, defaults)
    return defaults


async def prepare_run(
    memo: RunMemo,
    version: WorkflowVersionView,
    inputs: object,
    defaults: Mapping[str, dict[str, Any]],
    reuse: Reuse | None = None,
) -> PreparedRun:
    """The inputs checked against the version's plan, made and frozen once per version
    (`planned_version`, then remembered): pure work, on a thread for a large version not
    planned yet (contract 8b: planning a 12,000-node graph is a second of pure Python; on a
    thread the event loop takes its turn every few milliseconds for /health and the others)."""
    planned = memo.planned(version.id)
    if planned is None:
        if _node_count(version.graph) > OFF_LOOP_NODES:
            planned = await off_loop(planned_version, version, defaults)
        else:
            planned = planned_version(version, defaults)
        memo.remember_planned(version.id, planned)
    return _prepared(planned, inputs, reuse)


def planned_version(
    version: WorkflowVersionView, defaults: Mapping[str, dict[str, Any]]
) -> PlannedVersion:
    """The version's input nodes, its plan with the retry `defaults` of its function versions
    (`retry_defaults`), and the plan's snapshot: pure work, on any thread."""
    graph = parse_graph(version.graph)
    frozen = _with_retry_defaults(plan(graph, version.resolved_functions), defaults)
    inputs = tuple(n for n in graph.nodes if isinstance(n, InputNode))
    snapshot = frozen.as_dict()
    return PlannedVersion(inputs, frozen, snapshot, json.dumps(snapshot))


def _prepared(planned: PlannedVersion, inputs: object, reuse: Reuse | None) -> PreparedRun:
    resolved = resolve_run_inputs(planned.input_nodes, inputs)
    states = initial_states(planned.frozen)
    if reuse is not None:
        states.update(reuse(planned.frozen, resolved))
    return PreparedRun(resolved, planned.frozen, states, planned.snapshot, planned.written)


async def start_run(
    session: AsyncSession,
    memo: RunMemo,
    principal: Principal,
    order: RunOrder,
    *,
    reuse: Reuse | None = None,
) -> RunView:
    """Create the run `order` asks for in the caller's session (a re-run): `prepare_run`,
    then `insert_run`. `reuse` gives the nodes that start `success` from another run (a re-run
    from failure): they run nothing, so they need no access."""
    defaults = await retry_defaults(session, memo, order.version)
    prepared = await prepare_run(memo, order.version, order.inputs, defaults, reuse)
    return await insert_run(session, memo, principal, order, prepared)


async def insert_run(
    session: AsyncSession,
    memo: RunMemo,
    principal: Principal,
    order: RunOrder,
    prepared: PreparedRun,
) -> RunView:
    """Write the prepared run: every function version a node will run visible to the caller
    (now, in this transaction), then its rows, its plan and first states remembered."""
    assert isinstance(order.inputs, dict)
    frozen, states = prepared.frozen, prepared.states
    needed = sorted(
        {
            n.function_version_id
            for key, n in frozen.nodes.items()
            if n.function_version_id and states[key].status != "success"
        }
    )
    visible = await function_version_service.visible_versions_by_id(session, principal, needed)
    hidden = [v for v in needed if v not in visible]
    if hidden:
        raise PermissionDenied(
            policy.denial(f"workflow {order.slug!r}: it runs functions that are not visible to you")
        )
    run = WorkflowRun(
        id=new_id(),
        workflow_id=order.version.workflow_id,
        workflow_version_id=order.version.id,
        user_id=principal.user_id,
        status="pending",
        inputs=order.inputs,
        resolved_inputs=prepared.resolved,
        plan_snapshot=prepared.snapshot,
        revision=0,
        started_at=utcnow(),
        rerun_of=order.rerun_of,
        cache_refresh=order.refresh,
    )
    await record_run(session, run.id, order.slug, "pending")
    repository = RunCreationRepository.from_session(session)
    kinds = {key: node.kind for key, node in frozen.nodes.items()}
    started = {key: state for key, state in states.items() if state.status != "pending"}
    # The unit's events so far (the run's creation) written by its insert when that is the
    # unit's last statement (PostgreSQL, a run that starts with every node pending).
    once = not started and repository.inserts_at_once(len(kinds))
    held = held_for_last_statement(session) if once else None
    events = held.take() if held is not None else []
    await repository.insert_run(run, prepared.written_snapshot, kinds, events)
    if held is not None:
        held.written(events)
    await RunRepository.from_session(session).write_states(run.id, started, 0)
    changes.changed(run.id)
    # Remembered before the commit, which is harmless here: if it rolls back, no tick can
    # ever find this run id; if it commits, these are exactly its plan and revision-0 states.
    memo.plans.put(run.id, (run.plan_snapshot, frozen))
    memo.states.put(run.id, (0, states))
    return run_view(run, states)


def _node_count(graph: object) -> int:
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return len(nodes) if isinstance(nodes, list) else 0


def _with_retry_defaults(frozen: Plan, defaults: Mapping[str, dict[str, Any]]) -> Plan:
    """The plan with each function node that carries no retry policy given its function's
    manifest default, frozen into the run with the rest of the plan."""
    if not defaults:
        return frozen
    nodes = dict(frozen.nodes)
    for key, node in frozen.nodes.items():
        default = defaults.get(node.function_version_id or "")
        if node.kind == "function" and node.retry is None and default is not None:
            nodes[key] = replace(node, retry=retry_from_dict(default))
    return Plan(frozen.chains, frozen.waves, nodes, frozen.input_keys)


async def create_run(
    database: Database,
    memo: RunMemo,
    principal: Principal,
    slug: str,
    inputs: object,
    *,
    refresh: bool,
    quotas: Quotas,
) -> RunView:
    """A run of the workflow's latest version; `refresh`: its jobs are never answered from
    the result cache (contract section 10). One write transaction reads the workflow, the
    caller's room for runs, the version and its retry defaults, plans a version of up to
    `OFF_LOOP_NODES` nodes (pure work of a millisecond or so: a diamond's plan) and writes
    the run. A larger one is planned holding no session (a 12,000-node plan is a second of
    work: issue 27), then a second transaction checks again what may have changed meanwhile
    (the caller's sight of the workflow, their room for runs; every function version a node
    will run still visible to them is checked in the write either way) and writes it. A
    version planned before, in this process, is not planned again (`RunMemo.planned`): its
    run is written in the first transaction, whatever its size."""
    async with database.write_session() as session:
        workflow = await workflow_service.visible(session, principal, slug)
        await quota_service.require_run_room(session, principal, quotas)
        version = await latest_version(session, memo, workflow)
        defaults = await retry_defaults(session, memo, version)
        order = RunOrder(slug, version, inputs, refresh=refresh)
        planned = memo.planned(version.id)
        if planned is None and _node_count(version.graph) <= OFF_LOOP_NODES:
            planned = planned_version(version, defaults)
            memo.remember_planned(version.id, planned)
        if planned is not None:
            prepared = _prepared(planned, inputs, None)
            return await insert_run(session, memo, principal, order, prepared)
    prepared = await prepare_run(memo, version, inputs, defaults)
    async with database.write_session() as session:
        await workflow_service.visible(session, principal, slug)
        await quota_service.require_run_room(session, principal, quotas)
        return await insert_run(session, memo, principal, order, prepared)


async def latest_version(
    session: AsyncSession, memo: RunMemo, workflow: WorkflowView
) -> WorkflowVersionView:
    # A version is never written again: remembered by its number once read.
    version = memo.workflow_version(workflow.id, workflow.latest_version)
    if version is None:
        row = await WorkflowRepository.from_session(session).version(
            workflow.id, workflow.latest_version
        )
        assert row is not None
        version = version_view(row)
        memo.remember_workflow_version(workflow.id, workflow.latest_version, version)
    return version
