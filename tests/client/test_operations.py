"""The calls and flows both clients share, as plain data: what is sent, when a flow sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from calcgraph.client import models as m
from calcgraph.client import operations as ops
from calcgraph.client import operations_runs as runs_ops

WHEN = "2026-01-02T03:04:05Z"


def run(status: str, revision: int, **states: str) -> m.Run:
    """A run's answer as the server writes it (every field the document requires)."""
    node = {"job_id": None, "outputs": None, "error": None, "attempt": 0}
    return m.Run.model_validate(
        {
            "id": "r1",
            "workflow_id": "w1",
            "workflow_version_id": "v1",
            "status": status,
            "started_at": WHEN,
            "completed_at": None,
            "inputs": {},
            "terminal_outputs": None,
            "error_message": None,
            "first_failed_node_key": None,
            "revision": revision,
            "plan_snapshot": {},
            "node_states": {
                key: {**node, "status": state, "started_at": None, "finished_at": None}
                for key, state in states.items()
            },
        }
    )


def job(status: str, outputs: dict[str, Any] | None = None) -> m.Job:
    """A job's answer as the server writes it."""
    return m.Job.model_validate(
        {
            "id": "j",
            "function_id": "f",
            "function_version_id": "fv",
            "package_id": "p",
            "status": status,
            "inputs": {},
            "outputs": outputs,
            "error": None,
            "logs": None,
            "cache_hit": False,
            "workflow_run_id": None,
            "node_key": None,
            "created_at": WHEN,
            "started_at": None,
            "finished_at": None,
            "outputs_omitted": False,
            "inputs_omitted": False,
        }
    )


def drive(flow: ops.Flow[Any], answers: list[Any]) -> tuple[Any, list[Any]]:
    """Feed `answers` to the calls of a flow; return its result and every step it took."""
    steps: list[Any] = []
    pending = iter(answers)
    try:
        step = next(flow)
        while True:
            steps.append(step)
            step = flow.send(None if isinstance(step, ops.Sleep) else next(pending))
    except StopIteration as stop:
        return stop.value, steps


def test_long_poll_flow_pauses_only_after_a_tick_that_changed_nothing() -> None:
    seen: list[int] = []
    answers = [
        run("running", 1, a="running"),
        run("running", 1, a="running"),  # nothing changed: pause, then tick again
        run("running", 2, a="success", b="running"),
        run("completed", 3, a="success", b="success"),
    ]
    flow = runs_ops.run_until_done("r1", on_update=lambda r: seen.append(r.revision), period=5.0)
    final, steps = drive(flow, answers)
    assert final.status == "completed"
    assert seen == [1, 2, 3]
    kinds = [type(step).__name__ for step in steps]
    assert kinds == ["Call", "Call", "Sleep", "Call", "Call"]
    ticks = [step for step in steps if isinstance(step, ops.Call)]
    assert {(t.method, t.path, tuple(t.params), t.holds) for t in ticks} == {
        ("POST", "/workflow-runs/r1/tick", (("wait", "30.0"),), 30.0)
    }
    pause = next(step for step in steps if isinstance(step, ops.Sleep))
    assert 0 < pause.seconds <= 5.0


def test_polling_flow_ticks_every_period() -> None:
    answers = [run("running", 1), run("running", 2), run("failed", 3)]
    final, steps = drive(runs_ops.run_until_done("r1", period=2.0, long_poll=None), answers)
    assert final.status == "failed"
    assert [s.seconds for s in steps if isinstance(s, ops.Sleep)] == [2.0, 2.0]
    assert all(s.params == [] for s in steps if isinstance(s, ops.Call))


def test_wait_for_job_polls_then_times_out() -> None:
    running = job("running")
    done = job("success", {"y": 1})
    result, steps = drive(ops.wait_for_job("j", period=2.0), [running, running, done])
    assert result.outputs == {"y": 1}
    assert [type(s).__name__ for s in steps] == ["Call", "Sleep", "Call", "Sleep", "Call"]
    with pytest.raises(TimeoutError, match="still running"):
        drive(ops.wait_for_job("j", period=2.0, timeout=1.0), [running])


@pytest.mark.parametrize(
    ("name", "version", "path"),
    [
        ("demo-beam/cantilever", None, "/packages/demo-beam/functions/cantilever/execute"),
        (
            "demo-beam/cantilever@1.2.0",
            None,
            "/packages/demo-beam/functions/cantilever@1.2.0/execute",
        ),
        (
            "demo-beam/cantilever",
            "latest",
            "/packages/demo-beam/functions/cantilever@latest/execute",
        ),
        (
            "demo-beam@1.2.0/cantilever",
            None,
            "/packages/demo-beam@1.2.0/functions/cantilever/execute",
        ),
        ("0b9c-id", None, "/functions/0b9c-id/execute"),
        ("a b/c?d", None, "/packages/a%20b/functions/c%3Fd/execute"),
    ],
)
def test_execute_paths(name: str, version: str | None, path: str) -> None:
    assert ops.execute_path(name, version) == path


def test_execute_path_refusals() -> None:
    with pytest.raises(ValueError, match="not with an id"):
        ops.execute_path("some-id", "1.0.0")
    with pytest.raises(ValueError, match="two versions"):
        ops.execute_path("p/f@1.0.0", "2.0.0")


def test_package_directory_is_read_like_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "calcgraph.yaml").write_text("kind: package\n")
    (tmp_path / "beam.py").write_text("def f(): ...\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("X = 1\n")
    for ignored in (".git", "__pycache__", ".venv"):
        (tmp_path / ignored).mkdir()
        (tmp_path / ignored / "junk.py").write_text("")
    (tmp_path / "beam.pyc").write_bytes(b"\x00")
    (tmp_path / ".env").write_text("SECRET=1")
    manifest, files = ops.read_package_directory(tmp_path)
    assert manifest == "kind: package\n"
    assert sorted(files) == ["beam.py", "calcgraph.yaml", "lib/util.py"]
    (tmp_path / "data.bin").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        ops.read_package_directory(tmp_path)
    with pytest.raises(FileNotFoundError, match="no calcgraph.yaml"):
        ops.read_package_directory(tmp_path / "lib")
