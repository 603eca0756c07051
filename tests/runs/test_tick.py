"""The tick state machine, driven step by step with plain data."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from calcgraph.domain.runs.state import (
    JobResult,
    NodeState,
    RunState,
    TickResult,
    initial_states,
)
from calcgraph.domain.runs.tick import tick
from calcgraph.domain.workflows.planner import Plan
from tests.workflows.graphs import ex, fn, inp, plan_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Run:
    """A run driven by hand: holds what the service would hold in its rows."""

    def __init__(self, plan: Plan, inputs: Mapping[str, Any] | None = None) -> None:
        self.plan = plan
        self.inputs = dict({"x": 2.0} if inputs is None else inputs)
        self.states = initial_states(plan)
        self.run = RunState()
        self.results: dict[str, JobResult] = {}
        self.clock = T0
        self.last: TickResult | None = None

    def tick(self) -> TickResult:
        self.clock += timedelta(seconds=2)
        result = tick(
            self.plan,
            self.run,
            self.states,
            self.results,
            self.inputs,
            self.clock,
            new_job_id=lambda key: f"job-{key}",
        )
        self.states = {**self.states, **result.nodes}
        self.run = result.run
        self.last = result
        return result

    def finish(self, key: str, outputs: Mapping[str, Any] | None = None, **failed: str) -> None:
        job = self.states[key].job_id
        assert job is not None
        if failed:
            self.results[job] = JobResult.failed(failed["kind"], failed["message"], self.clock)
        else:
            self.results[job] = JobResult.success(outputs or {"out": key}, self.clock)

    def state(self) -> str:
        """The run status, read through a call so mypy does not narrow it across ticks."""
        return self.run.status

    def status(self) -> dict[str, str]:
        return {key: state.status for key, state in self.states.items()}


def submitted(result: TickResult) -> list[str]:
    return [job.node_key for job in result.jobs]


DIAMOND = plan_of(
    inp("x"), fn("A", a="x"), fn("B", a="A.out"), fn("C", a="A.out"), fn("D", b="B.out", c="C.out")
)


class TestDiamond:
    def test_step_by_step(self) -> None:
        run = Run(DIAMOND)
        first = run.tick()
        assert submitted(first) == ["A"]
        assert first.jobs[0].inputs == {"a": 2.0}
        assert first.jobs[0].chain == "chain-0"
        assert run.state() == "running"
        assert run.states["A"] == NodeState("running", "job-A", attempt=1, started_at=run.clock)

        assert not run.tick().changed

        run.finish("A", {"out": 10})
        third = run.tick()
        assert submitted(third) == ["B", "C"]
        assert third.jobs[0].inputs == {"a": 10}
        assert set(third.nodes) == {"A", "B", "C"}
        assert run.states["A"].outputs == {"out": 10}

        run.finish("B", {"out": 1})
        fourth = run.tick()
        assert submitted(fourth) == []
        assert run.status() == {"A": "success", "B": "success", "C": "running", "D": "pending"}

        run.finish("C", {"out": 2})
        fifth = run.tick()
        assert submitted(fifth) == ["D"]
        assert fifth.jobs[0].inputs == {"b": 1, "c": 2}

        run.finish("D", {"out": 3})
        done = run.tick()
        assert run.state() == "completed"
        assert run.run.completed_at == run.clock
        assert run.run.terminal_outputs == {"D": {"out": 3}}
        assert done.run_changed
        assert set(done.nodes) == {"D"}

        assert not run.tick().changed
        assert run.run.completed_at == done.run.completed_at

    def test_results_passed_again_change_nothing(self) -> None:
        run = Run(DIAMOND)
        run.tick()
        run.finish("A")
        run.tick()
        again = run.tick()
        assert again.nodes == {}
        assert again.jobs == ()
        assert not again.changed


class TestFailure:
    PLAN = plan_of(
        inp("x"),
        fn("A", a="x"),
        fn("B", a="A.out"),
        fn("C", a="B.out"),
        fn("I", a="x"),
        fn("J", a="I.out"),
    )

    def test_downstream_cancelled_independent_running_node_continues(self) -> None:
        run = Run(self.PLAN)
        assert submitted(run.tick()) == ["A", "I"]
        run.finish("A", kind="user_error", message="division by zero")
        failed = run.tick()
        assert failed.jobs == ()
        assert run.status() == {
            "A": "failed",
            "B": "cancelled",
            "C": "cancelled",
            "I": "running",
            "J": "cancelled",
        }
        assert run.states["A"].error == {"kind": "user_error", "message": "division by zero"}
        assert run.state() == "failed"
        assert run.run.first_failed_node_key == "A"
        assert run.run.error_message is not None
        assert "division by zero" in run.run.error_message
        assert run.run.completed_at == run.clock
        assert run.run.terminal_outputs is None

        run.finish("I", {"out": 5})
        later = run.tick()
        assert set(later.nodes) == {"I"}
        assert run.states["I"].status == "success"
        assert run.states["I"].outputs == {"out": 5}
        assert later.jobs == ()
        assert run.state() == "failed"
        assert not later.run_changed
        assert not run.tick().changed

    def test_first_failed_is_the_earliest_failure_then_key_order(self) -> None:
        plan = plan_of(inp("x"), fn("b", a="x"), fn("a", a="x"), fn("c", a="x"))
        run = Run(plan)
        run.tick()
        run.results["job-c"] = JobResult.failed("timeout", "slow", T0)
        run.results["job-b"] = JobResult.failed("user_error", "bad", T0 + timedelta(seconds=1))
        run.results["job-a"] = JobResult.failed("user_error", "bad", T0 + timedelta(seconds=1))
        run.tick()
        assert run.run.first_failed_node_key == "c"
        del run.results["job-c"]
        tie = Run(plan)
        tie.tick()
        tie.results = {k: v for k, v in run.results.items()}
        tie.tick()
        assert tie.run.first_failed_node_key == "a"

    def test_a_failure_stops_submission_in_the_same_tick(self) -> None:
        run = Run(self.PLAN)
        run.tick()
        run.finish("A", kind="user_error", message="no")
        run.finish("I", {"out": 1})
        result = run.tick()
        assert result.jobs == ()
        assert run.status()["J"] == "cancelled"


class TestExtract:
    def build(self, *extra: dict[str, Any]) -> Run:
        return Run(plan_of(inp("x"), fn("beam", a="x"), *extra))

    BEAM = {"moment": 12.5, "deflection": 0.01, "reactions": {"left": 1.0, "right": 2.0}}

    def test_pick_feeds_a_function_in_the_same_tick(self) -> None:
        run = self.build(ex("m", "pick", "beam", "mom*"), fn("check", moment="m.value"))
        run.tick()
        run.finish("beam", self.BEAM)
        result = run.tick()
        assert run.states["m"].status == "success"
        assert run.states["m"].outputs == {"value": 12.5}
        assert run.states["m"].job_id is None
        assert submitted(result) == ["check"]
        assert result.jobs[0].inputs == {"moment": 12.5}

    def test_extracts_cascade_in_one_tick(self) -> None:
        run = self.build(
            ex("f", "filter", "beam", "reactions/*"),
            ex("p", "pick", "f", "*right"),
            fn("use", r="p.value"),
        )
        run.tick()
        run.finish("beam", self.BEAM)
        result = run.tick()
        assert run.states["f"].outputs == {"reactions/left": 1.0, "reactions/right": 2.0}
        assert run.states["p"].outputs == {"value": 2.0}
        assert result.jobs[0].inputs == {"r": 2.0}

    def test_filter_feeds_matched_keys(self) -> None:
        run = self.build(
            ex("f", "filter", "beam", "reactions/*"), fn("use", left="f.reactions/left")
        )
        run.tick()
        run.finish("beam", self.BEAM)
        assert run.tick().jobs[0].inputs == {"left": 1.0}

    def test_pick_without_a_match_fails_the_node_and_the_run(self) -> None:
        run = self.build(ex("t", "pick", "beam", "torque*"), fn("use", t="t.value"))
        run.tick()
        run.finish("beam", self.BEAM)
        result = run.tick()
        assert result.jobs == ()
        assert run.status() == {"beam": "success", "t": "failed", "use": "cancelled"}
        assert run.states["t"].error is not None
        assert run.states["t"].error["kind"] == "extract_error"
        assert run.state() == "failed"
        assert run.run.first_failed_node_key == "t"

    def test_empty_filter_then_missing_key_fails_the_consumer(self) -> None:
        run = self.build(ex("f", "filter", "beam", "nothing*"), fn("use", v="f.nothing"))
        run.tick()
        run.finish("beam", self.BEAM)
        result = run.tick()
        assert run.states["f"].outputs == {}
        assert run.states["use"].status == "failed"
        assert run.states["use"].error is not None
        assert run.states["use"].error["kind"] == "input_error"
        assert result.jobs == ()
        assert run.run.first_failed_node_key == "use"

    def test_a_dangling_extract_must_succeed_but_is_not_terminal(self) -> None:
        run = self.build(ex("m", "pick", "beam", "mom*"))
        run.tick()
        run.finish("beam", self.BEAM)
        run.tick()
        assert run.state() == "completed"
        assert run.run.terminal_outputs == {}


class TestInputs:
    def test_input_values_pass_verbatim(self) -> None:
        struct = {"force": [1.0, 2.0, 3.0], "moment": [0.0, 0.0, 1.0]}
        run = Run(plan_of(inp("t", "Torsor"), fn("a", t="t")), {"t": struct})
        assert run.tick().jobs[0].inputs == {"t": struct}

    def test_a_missing_run_input_fails_the_node(self) -> None:
        run = Run(plan_of(inp("x"), fn("a", a="x")), {})
        result = run.tick()
        assert result.jobs == ()
        assert run.states["a"].status == "failed"
        assert run.state() == "failed"


class TestRunStatus:
    def test_an_empty_plan_completes_at_once(self) -> None:
        run = Run(plan_of(inp("x")))
        run.tick()
        assert run.state() == "completed"
        assert run.run.terminal_outputs == {}

    def test_a_terminal_run_submits_nothing(self) -> None:
        run = Run(DIAMOND)
        run.run = RunState("cancelled")
        result = run.tick()
        assert not result.changed

    def test_a_long_chain_is_submitted_one_node_per_tick(self) -> None:
        nodes = [inp("x"), fn("n0", a="x")] + [fn(f"n{i}", a=f"n{i - 1}.out") for i in range(1, 5)]
        run = Run(plan_of(*nodes))
        for index in range(5):
            result = run.tick()
            assert submitted(result) == [f"n{index}"]
            assert result.jobs[0].chain == "chain-0"
            run.finish(f"n{index}", {"out": index})
        run.tick()
        assert run.run.terminal_outputs == {"n4": {"out": 4}}
