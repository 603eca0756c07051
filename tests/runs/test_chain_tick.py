"""The tick's side of chain execution, with plain data: chain jobs carry the rest of their
chain, and jobs a chain worker started are adopted, a whole chain in one tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from calcgraph.domain.runs.state import (
    JobResult,
    NodeState,
    RunState,
    StartedJob,
    TickResult,
    initial_states,
)
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.workflows.planner import Plan
from tests.workflows.graphs import fn, inp, plan_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _chain(length: int) -> Plan:
    nodes = [inp("x"), fn("n0", x="x")]
    nodes += [fn(f"n{i}", x=f"n{i - 1}.y") for i in range(1, length)]
    return plan_of(*nodes)


def _tick(
    plan: Plan,
    states: dict[str, NodeState],
    results: dict[str, JobResult] | None = None,
    started: dict[str, StartedJob] | None = None,
    *,
    run: RunState | None = None,
    chains: bool = True,
    at: int = 0,
) -> TickResult:
    return tick(
        plan,
        run or RunState(),
        states,
        results or {},
        {"x": 1.0},
        T0 + timedelta(seconds=at),
        new_job_id=lambda key: f"job-{key}",
        started=started,
        chains=chains,
    )


def test_a_chain_head_is_submitted_with_the_rest_of_its_chain() -> None:
    plan = _chain(4)
    chained = _tick(plan, initial_states(plan))
    (job,) = chained.jobs
    assert (job.node_key, job.chain_rest) == ("n0", ("n1", "n2", "n3"))
    assert job.inputs == {"x": 1.0}
    per_node = _tick(plan, initial_states(plan), chains=False)
    assert [(j.node_key, j.chain_rest) for j in per_node.jobs] == [("n0", ())]
    # Only the job differs: node states are the same in both modes.
    assert chained.nodes == per_node.nodes


def test_a_node_submitted_mid_chain_carries_only_what_follows_it() -> None:
    plan = _chain(3)
    states = {
        **initial_states(plan),
        "n0": NodeState("success", job_id="j0", outputs={"y": 5.0}, attempt=1),
    }
    (job,) = _tick(plan, states).jobs
    assert (job.node_key, job.chain_rest, job.inputs) == ("n1", ("n2",), {"x": 5.0})


def test_jobs_a_chain_worker_started_are_adopted_and_reconciled_in_one_tick() -> None:
    plan = _chain(4)
    first = _tick(plan, initial_states(plan))
    states = {**initial_states(plan), **first.nodes}
    results = {
        "job-n0": JobResult.success({"y": 2.0}, T0),
        "w1": JobResult.success({"y": 3.0}, T0 + timedelta(seconds=1)),
    }
    started = {
        "n1": StartedJob("w1", 1, T0),
        "n2": StartedJob("w2", 1, T0 + timedelta(seconds=1)),
    }
    result = _tick(plan, states, results, started, run=first.run, at=5)
    assert not result.jobs  # nothing is submitted for nodes the worker already runs
    new = {**states, **result.nodes}
    assert {k: s.status for k, s in new.items()} == {
        "n0": "success",
        "n1": "success",
        "n2": "running",
        "n3": "pending",
    }
    assert new["n1"].job_id == "w1"
    assert new["n1"].outputs == {"y": 3.0}
    assert new["n2"].job_id == "w2"
    assert new["n2"].started_at == T0 + timedelta(seconds=1)
    assert new["n2"].attempt == 1
    assert result.run.status == "running"
    # The next tick finishes the chain once the worker did.
    results["w2"] = JobResult.success({"y": 4.0})
    results["w3"] = JobResult.success({"y": 5.0})
    done = _tick(plan, new, results, {"n3": StartedJob("w3", 1, T0)}, run=result.run, at=9)
    assert done.run.status == "completed"
    assert done.run.terminal_outputs == {"n3": {"y": 5.0}}


def test_a_failure_mid_chain_fails_the_run_as_in_node_execution() -> None:
    plan = _chain(4)
    states = {
        **initial_states(plan),
        "n0": NodeState("running", job_id="j0", attempt=1, started_at=T0),
    }
    results = {
        "j0": JobResult.success({"y": 2.0}, T0),
        "w1": JobResult.failed("user_error", "boom", T0 + timedelta(seconds=1)),
    }
    chained = _tick(plan, states, results, {"n1": StartedJob("w1", 1, T0)})
    assert chained.run.status == "failed"
    assert chained.run.first_failed_node_key == "n1"
    assert chained.run.error_message == "node 'n1' failed: user_error: boom"
    new = {**states, **chained.nodes}
    assert [new[k].status for k in ("n0", "n1", "n2", "n3")] == [
        "success",
        "failed",
        "cancelled",
        "cancelled",
    ]
    assert new["n2"].job_id is None


def test_a_started_job_of_a_failed_run_is_still_followed() -> None:
    """A worker may have started the next node just before another branch failed the run:
    that node is running, like an independent running node, and is not cancelled."""
    plan = plan_of(inp("x"), fn("a", x="x"), fn("b", x="a.y"), fn("f", x="x"))
    states = {
        **initial_states(plan),
        "a": NodeState("running", job_id="ja", attempt=1),
        "f": NodeState("running", job_id="jf", attempt=1),
    }
    results = {
        "ja": JobResult.success({"y": 1.0}, T0),
        "jf": JobResult.failed("user_error", "no", T0),
    }
    failed = _tick(plan, states, results, {"b": StartedJob("wb", 1, T0)}, run=RunState("running"))
    new = {**states, **failed.nodes}
    assert failed.run.status == "failed"
    assert failed.run.first_failed_node_key == "f"
    assert (new["b"].status, new["b"].job_id) == ("running", "wb")
    later = _tick(plan, new, {"wb": JobResult.success({"y": 2.0})}, run=failed.run)
    assert later.nodes["b"].status == "success"
    assert later.run.status == "failed"


def test_a_started_job_waits_for_its_dependencies() -> None:
    plan = _chain(2)
    states = {**initial_states(plan), "n0": NodeState("running", job_id="j0", attempt=1)}
    result = _tick(plan, states, {}, {"n1": StartedJob("w1", 1, T0)}, run=RunState("running"))
    assert result.nodes == {}
    assert not result.changed


def test_a_start_read_again_after_its_adoption_is_not_adopted_twice() -> None:
    """A locked tick reads its work in the statement's snapshot, which may be older than the
    lock: a chain start an earlier tick adopted may be read again. A start of an attempt the
    node has been through is not adopted; the next attempt's is."""
    plan = _chain(2)
    done = NodeState("success", job_id="j0", outputs={"y": 2.0}, attempt=1)
    retrying = NodeState("pending", job_id="w1", attempt=1, retry_at=T0 + timedelta(hours=1))
    states = {**initial_states(plan), "n0": done, "n1": retrying}
    stale = _tick(plan, states, {}, {"n1": StartedJob("w1", 1, T0)}, run=RunState("running"))
    assert "n1" not in stale.nodes
    assert not stale.jobs
    fresh = _tick(plan, states, {}, {"n1": StartedJob("w2", 2, T0)}, run=RunState("running"))
    assert (fresh.nodes["n1"].status, fresh.nodes["n1"].job_id) == ("running", "w2")
    assert fresh.nodes["n1"].attempt == 2
