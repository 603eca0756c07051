"""The run progress renderer, fed plain run dicts as the REST API returns them."""

from __future__ import annotations

import copy
import io
import re
from typing import Any

from rich.console import Console

from calcgraph.progress import RunProgress, format_value, output_units

PLAN = {
    "format": 1,
    "nodes": [
        {"node_key": "beam", "kind": "function", "function": "demo-beam/cantilever"},
        {
            "node_key": "moment",
            "kind": "extract",
            "mode": "pick",
            "from_node_key": "beam",
            "pattern": "mom*",
        },
        {"node_key": "check", "kind": "function", "function": "demo-beam/stress_check"},
    ],
}
T0 = "2026-11-21T08:00:00Z"


def _run(status: str, **states: dict[str, Any]) -> dict[str, Any]:
    node_states = {
        key: {
            "status": "pending",
            "job_id": None,
            "outputs": None,
            "error": None,
            "attempt": 0,
            "started_at": None,
            "finished_at": None,
        }
        for key in ("beam", "moment", "check")
    }
    for key, state in states.items():
        node_states[key].update(state)
    return {
        "id": "0f3c2d1e-aaaa-bbbb-cccc-000000000001",
        "status": status,
        "started_at": T0,
        "completed_at": "2026-11-21T08:00:02.5Z" if status in ("completed", "failed") else None,
        "plan_snapshot": copy.deepcopy(PLAN),
        "node_states": node_states,
        "terminal_outputs": None,
        "error_message": None,
        "first_failed_node_key": None,
    }


RUNNING = {"status": "running", "job_id": "1234567890ab", "attempt": 1, "started_at": T0}
DONE = {**RUNNING, "status": "success", "finished_at": "2026-11-21T08:00:01.25Z"}


def _plain() -> tuple[RunProgress, io.StringIO]:
    buffer = io.StringIO()
    return RunProgress(Console(file=buffer, width=60), live=None), buffer


def _states(lines: list[str]) -> list[tuple[str, str]]:
    found = []
    for line in lines:
        match = re.match(r"\[\s*[\d.]+s\] (\S+)\s+(?:\S+\s+)?(\S+)", line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


class TestPlainLines:
    def test_one_line_per_state_change_and_none_when_nothing_changed(self) -> None:
        progress, buffer = _plain()
        assert progress.live is False  # a StringIO is no terminal
        progress.update(_run("pending"))
        progress.update(_run("running", beam=RUNNING))
        progress.update(_run("running", beam=RUNNING))  # a tick that changed nothing
        progress.update(_run("running", beam=DONE, moment={"status": "success"}))
        completed = _run(
            "completed",
            beam=DONE,
            moment={"status": "success"},
            check={**DONE, "outputs": {"stress": 64.6e6}},
        )
        completed["terminal_outputs"] = {"check": {"stress": 64.6e6, "utilisation": 0.182}}
        progress.units = {"check": {"stress": "Pa"}}
        progress.finish(completed)
        lines = buffer.getvalue().splitlines()
        assert _states(lines) == [
            ("run", "pending"),
            ("beam", "running"),
            ("run", "running"),
            ("beam", "success"),
            ("moment", "success"),
            ("check", "success"),
            ("run", "completed"),
        ]
        # Long lines stay whole: a log is read line by line.
        assert all("job 12345678" in line for line in lines if " beam " in line)
        assert "beam             function success   1.25s job 12345678" in buffer.getvalue()
        assert lines[-3:] == [
            "completed in 2.50s; terminal outputs:",
            "  check.stress = 6.46e+07 Pa",
            "  check.utilisation = 0.182",
        ]

    def test_failure_names_the_node_and_its_error(self) -> None:
        progress, buffer = _plain()
        error = {"kind": "user_error", "message": "ZeroDivisionError: float division by zero"}
        failed = _run(
            "failed",
            beam=DONE,
            moment={"status": "success"},
            check={**RUNNING, "status": "failed", "error": error, "finished_at": T0},
        )
        failed["first_failed_node_key"] = "check"
        failed["error_message"] = "node check failed"
        progress.finish(failed)
        out = buffer.getvalue()
        assert "check            function failed    0.00s job 12345678 user_error: Zero" in out
        assert out.splitlines()[-3:] == [
            "failed in 2.50s",
            "  failed node: check",
            "  error: user_error: ZeroDivisionError: float division by zero",
        ]
        failed["first_failed_node_key"] = None
        assert RunProgress.failure_lines(failed) == ["run: node check failed"]


class TestLiveTable:
    def test_table_then_outputs_panel_with_units(self) -> None:
        buffer = io.StringIO()
        console = Console(file=buffer, width=100, force_terminal=True, color_system=None)
        completed = _run("completed", beam=DONE, moment={"status": "success"}, check=DONE)
        completed["terminal_outputs"] = {"check": {"stress": 64.6e6, "verdict": "PASS"}}
        with RunProgress(console, units={"check": {"stress": "Pa"}}, title="demo") as progress:
            assert progress.live is True
            progress.update(_run("running", beam=RUNNING))
            progress.finish(completed)
        out = buffer.getvalue()
        for text in ("demo-beam/cantilever", "pick beam:mom*", "✓ success", "1.25s", "12345678"):
            assert text in out
        assert re.search(r"check\.stress\s+6\.46e\+07 Pa", out)
        assert re.search(r"check\.verdict\s+PASS", out)
        assert "completed in 2.50s" in out

    def test_failed_panel(self) -> None:
        buffer = io.StringIO()
        console = Console(file=buffer, width=100, force_terminal=True, color_system=None)
        failed = _run(
            "failed",
            check={"status": "failed", "error": {"kind": "timeout", "message": "300 s"}},
        )
        failed["first_failed_node_key"] = "check"
        with RunProgress(console) as progress:
            progress.finish(failed)
        out = buffer.getvalue()
        assert "failed after 2.50s" in out
        assert "failed node: check" in out
        assert "error: timeout: 300 s" in out
        assert "✗ failed" in out


def test_rows_follow_the_plan_and_describe_extract_nodes() -> None:
    rows = RunProgress.rows(_run("running", beam=RUNNING))
    assert [(r["node_key"], r["kind"], r["function"], r["status"]) for r in rows] == [
        ("beam", "function", "demo-beam/cantilever", "running"),
        ("moment", "extract", "pick beam:mom*", "pending"),
        ("check", "function", "demo-beam/stress_check", "pending"),
    ]


def test_output_units_from_the_graphql_answer() -> None:
    data = {
        "types": [
            {"name": "Float", "unit": None},
            {"name": "Length", "unit": "m"},
            {"name": "Moment", "unit": "N·m"},
        ],
        "workflowRun": {
            "nodeStates": [
                {
                    "nodeKey": "beam",
                    "functionVersion": {
                        "outputsSchema": {
                            "deflection": {"type": "Length"},
                            "moment": {"type": "Moment"},
                            "ratio": {"type": "Float"},
                        }
                    },
                },
                {"nodeKey": "pick", "functionVersion": None},
            ]
        },
    }
    assert output_units(data) == {"beam": {"deflection": "m", "moment": "N·m"}}


def test_format_value() -> None:
    assert format_value(0.006155, "m") == "0.006155 m"
    assert format_value(36000.0, "N·m") == "36000 N·m"
    assert format_value(float("inf")) == "inf"
    assert format_value(3) == "3"
    assert format_value(True) == "true"
    assert format_value([1.0, 2.0], "N") == "[1.0, 2.0] N"
    assert format_value("PASS") == "PASS"


class TestCacheHitsAndComputedOutputs:
    """Issue 15: the live table marks cache hits; the demo lists the checks it computed."""

    def _finished(self) -> dict[str, Any]:
        run = _run(
            "completed",
            beam={**DONE, "job_id": "cached-job", "outputs": {"moment": 36000.0}},
            moment={**DONE, "job_id": None, "outputs": {"value": 36000.0}},
            check={**DONE, "job_id": "fresh-job", "outputs": {"utilisation": 0.18}},
        )
        run["terminal_outputs"] = {"check": {"utilisation": 0.18}}
        return run

    def test_cache_hits_are_looked_up_once_and_marked(self) -> None:
        asked: list[str] = []

        def lookup(job_id: str) -> bool:
            asked.append(job_id)
            return job_id == "cached-job"

        buffer = io.StringIO()
        progress = RunProgress(Console(file=buffer, width=100), live=False, cache_lookup=lookup)
        run = self._finished()
        progress.update(run)
        progress.update(run)
        assert sorted(asked) == ["cached-job", "fresh-job"]
        lines = buffer.getvalue().splitlines()
        assert any("] beam " in line and line.endswith("cache hit") for line in lines)
        assert not any("] check " in line and "cache hit" in line for line in lines)

        live = RunProgress(Console(file=io.StringIO(), width=120), live=True, cache_lookup=lookup)
        live.update(run)
        live._stop()
        console = Console(file=io.StringIO(), width=120, record=True)
        console.print(live.table(run))
        rows = {line.split()[0]: line for line in console.export_text().splitlines() if line}
        assert "(cache hit)" in rows["beam"]
        assert "(cache hit)" not in rows["check"]

    def test_computed_outputs_with_units_before_the_terminal_ones(self) -> None:
        buffer = io.StringIO()
        progress = RunProgress(
            Console(file=buffer, width=100),
            live=False,
            units={"beam": {"moment": "N·m"}},
            show_computed=True,
        )
        progress.finish(self._finished())
        out = buffer.getvalue()
        assert "  beam.moment = 36000 N·m" in out
        assert "  check.utilisation = 0.18" in out
        assert "moment.value" not in out  # extract nodes repeat what they pick
