"""Run control in the pure tick (contract section 10): retry policies, the cancelling tick, and
which nodes a re-run from failure reuses. Plain data, no database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from calcgraph.domain.runs.rerun import reused_states
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.workflows import retry as retry_rules
from calcgraph.domain.workflows.graph import parse_graph
from calcgraph.domain.workflows.planner import Plan
from calcgraph.domain.workflows.retry import RetryPolicy
from tests.runs.test_tick import Run as PlainRun
from tests.runs.test_tick import submitted
from tests.workflows.graphs import ex, fn, inp, plan_of


class Run(PlainRun):
    """A run whose every job has an id of its own (a retry is a new job)."""

    def tick(self) -> Any:
        self.clock += timedelta(seconds=2)
        count = len(self.results) + sum(1 for s in self.states.values() if s.job_id)
        result = tick(
            self.plan,
            self.run,
            self.states,
            self.results,
            self.inputs,
            self.clock,
            new_job_id=lambda key: f"job-{key}-{count}-{self.clock.timestamp()}",
        )
        self.states = {**self.states, **result.nodes}
        self.run = result.run
        self.last = result
        return result


def with_retry(node: dict[str, Any], **policy: Any) -> dict[str, Any]:
    return {**node, "retry": policy}


def chain(**policy: Any) -> Plan:
    return plan_of(inp("x"), with_retry(fn("A", a="x"), **policy), fn("B", b="A.out"))


class TestPolicy:
    def test_defaults(self) -> None:
        policy, problems = retry_rules.parse({"max_attempts": 3})
        assert problems == []
        assert policy == RetryPolicy(3, 1.0, 2.0, 300.0, retry_rules.DEFAULT_ON)
        assert "user_error" not in policy.on
        assert "cancelled" not in policy.on

    def test_backoff_is_capped(self) -> None:
        policy = RetryPolicy(10, 1.0, 2.0, 5.0)
        assert [policy.delay(a).total_seconds() for a in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
        assert RetryPolicy(10, 1.0, 1e300, 7.0).delay(10) == timedelta(seconds=7)

    @pytest.mark.parametrize(
        "raw",
        [
            {"max_attempts": 0},
            {"max_attempts": 11},
            {"max_attempts": True},
            {"max_attempts": "3"},
            {"max_attempts": 3, "backoff_coefficient": 0.5},
            {"max_attempts": 3, "initial_interval_s": -1},
            {"max_attempts": 3, "max_interval_s": float("inf")},
            {"max_attempts": 3, "on": ["bogus"]},
            {"max_attempts": 3, "on": "timeout"},
            {"max_attempts": 3, "surprise": 1},
            {},
            [],
        ],
    )
    def test_out_of_range_is_refused(self, raw: object) -> None:
        policy, problems = retry_rules.parse(raw)
        assert policy is None
        assert problems

    def test_invalid_policy_is_a_graph_problem(self) -> None:
        graph = parse_graph({"nodes": [inp("x"), with_retry(fn("A", a="x"), max_attempts=99)]})
        assert [(p.category, p.node_key) for p in graph.problems] == [
            ("invalid_retry_policies", "A")
        ]

    def test_the_plan_snapshot_keeps_the_policy(self) -> None:
        plan = chain(max_attempts=4, initial_interval_s=0.5, on=["timeout"])
        again = Plan.from_dict(plan.as_dict())
        assert again.nodes["A"].retry == RetryPolicy(4, 0.5, 2.0, 300.0, ("timeout",))
        assert again.nodes["B"].retry is None


class TestRetry:
    def test_a_retried_failure_waits_then_submits_the_next_attempt(self) -> None:
        run = Run(chain(max_attempts=3, initial_interval_s=10, on=["timeout"]))
        assert submitted(run.tick()) == ["A"]
        first_job = run.states["A"].job_id
        run.finish("A", kind="timeout", message="slow")
        failed_at = run.clock
        result = run.tick()
        state = run.states["A"]
        assert state.status == "pending"
        assert state.attempt == 2
        assert state.retry_at == failed_at + timedelta(seconds=10)
        assert state.attempts == (
            {"attempt": 1, "job_id": first_job, "error": {"kind": "timeout", "message": "slow"}},
        )
        assert run.state() == "running"
        assert run.run.retry_at == state.retry_at
        assert result.jobs == ()
        # Ticks before retry_at submit nothing.
        while run.clock + timedelta(seconds=2) < state.retry_at:
            assert run.tick().jobs == ()
        second = run.tick()
        assert submitted(second) == ["A"]
        assert run.states["A"].attempt == 2
        assert run.states["A"].retry_at is None
        assert run.run.retry_at is None
        assert second.jobs[0].job_id != first_job
        run.finish("A", {"out": 1.0})
        run.tick()
        assert run.states["A"].status == "success"
        assert len(run.states["A"].attempts) == 1

    def test_the_run_fails_only_when_the_last_attempt_fails(self) -> None:
        run = Run(chain(max_attempts=2, initial_interval_s=0))
        for attempt in (1, 2):
            run.tick()
            assert run.states["A"].attempt == attempt
            run.finish("A", kind="sandbox_error", message="blip")
        run.tick()
        assert run.state() == "failed"
        assert run.states["A"].status == "failed"
        assert run.states["A"].attempt == 2
        assert [a["attempt"] for a in run.states["A"].attempts] == [1]
        assert run.run.first_failed_node_key == "A"

    def test_kinds_outside_on_fail_at_once(self) -> None:
        run = Run(chain(max_attempts=5, initial_interval_s=0))
        run.tick()
        run.finish("A", kind="user_error", message="bad input")  # not retried by default
        run.tick()
        assert run.state() == "failed"
        assert run.states["A"].attempts == ()

    def test_a_failure_elsewhere_cancels_a_waiting_retry(self) -> None:
        plan = plan_of(
            inp("x"),
            with_retry(fn("A", a="x"), max_attempts=3, initial_interval_s=60),
            fn("C", a="x"),
        )
        run = Run(plan)
        run.tick()
        run.finish("A", kind="timeout", message="slow")
        run.finish("C", kind="user_error", message="no")
        run.tick()
        assert run.state() == "failed"
        assert run.states["A"].status == "cancelled"
        assert run.states["A"].retry_at is None


class TestCancel:
    def test_pending_and_running_nodes_are_cancelled(self) -> None:
        run = Run(chain(max_attempts=1))
        run.tick()
        run.finish("A", {"out": 1.0})  # finished, but the cancel comes first: stays cancelled
        result = tick(
            run.plan, run.run, run.states, run.results, run.inputs, run.clock, cancel=True
        )
        assert result.run.status == "cancelled"
        assert result.run.completed_at == run.clock
        assert {k: s.status for k, s in result.nodes.items()} == {
            "A": "cancelled",
            "B": "cancelled",
        }
        assert result.jobs == ()

    def test_ticks_of_a_cancelled_run_change_nothing(self) -> None:
        run = Run(chain(max_attempts=1))
        run.tick()
        cancelled = tick(run.plan, run.run, run.states, {}, run.inputs, run.clock, cancel=True)
        states = {**run.states, **cancelled.nodes}
        run.finish("A", {"out": 1.0})
        later = tick(run.plan, cancelled.run, states, run.results, run.inputs, run.clock)
        assert not later.changed
        again = tick(run.plan, cancelled.run, states, {}, run.inputs, run.clock, cancel=True)
        assert not again.changed

    def test_a_terminal_run_is_not_cancelled(self) -> None:
        run = Run(chain(max_attempts=1))
        run.tick()
        run.finish("A", kind="user_error", message="no")
        run.tick()
        assert run.state() == "failed"
        result = tick(run.plan, run.run, run.states, {}, run.inputs, run.clock, cancel=True)
        assert not result.changed


def versioned(plan: Plan, **moved: str) -> Plan:
    """`plan` with each function node on version `v1` (or the one `moved` names)."""
    data = plan.as_dict()
    data["nodes"] = [
        {**n, "function_version_id": moved.get(n["node_key"], "v1")}
        if n["kind"] == "function"
        else n
        for n in data["nodes"]
    ]
    return Plan.from_dict(data)


class TestReuse:
    def original(self) -> Run:
        plan = versioned(
            plan_of(
                inp("x"),
                inp("lim"),
                fn("A", a="x"),
                ex("E", "pick", "A", "out"),
                fn("B", b="E.value"),
                fn("G", a="A.out", limit="lim"),
            )
        )
        run = Run(plan, {"x": 1.0, "lim": 0.0})
        run.tick()
        run.finish("A", {"out": 2.0})
        run.tick()
        run.finish("B", {"out": 3.0})
        run.finish("G", kind="user_error", message="over the limit")
        run.tick()
        assert run.state() == "failed"
        return run

    def test_succeeded_nodes_with_the_same_inputs_are_reused(self) -> None:
        run = self.original()
        reused = reused_states(run.plan, {"x": 1.0, "lim": 10.0}, run.plan, run.states, run.inputs)
        assert set(reused) == {"A", "E", "B"}
        assert reused["A"].reused
        assert reused["A"].job_id == run.states["A"].job_id
        assert reused["A"].outputs == {"out": 2.0}
        assert reused["B"].reused
        assert not reused["E"].reused  # an extract is evaluated, not reused

    def test_changed_inputs_run_again(self) -> None:
        run = self.original()
        reused = reused_states(run.plan, {"x": 5.0, "lim": 0.0}, run.plan, run.states, run.inputs)
        assert reused == {}

    def test_another_function_version_runs_again(self) -> None:
        run = self.original()
        moved = versioned(run.plan, A="v2")
        reused = reused_states(moved, run.inputs, run.plan, run.states, run.inputs)
        assert "A" not in reused
        assert "B" not in reused  # its upstream runs again
