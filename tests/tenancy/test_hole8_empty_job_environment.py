"""Hole 8 (environment): inside bwrap, `/proc/1/environ` showed the worker's host directory (the
shell that joins the cgroups exported PWD to bwrap, the sandbox's pid 1). Jobs now start with a
minimal, fixed environment on every backend, and no process they can see carries the host's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import SandboxBackend
from tests.sandbox.conftest import Runner, contained

MARK = "calcgraphhostmark"
# What a job's own environment may hold: fixed names, none of them the host's values.
ALLOWED = {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "HOSTNAME", "LD_LIBRARY_PATH"}

PROBE = """
import os
def main():
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                found[pid] = handle.read().decode("utf-8", "replace").replace("\\x00", "\\n")
        except OSError as exc:
            found[pid] = "unreadable: " + type(exc).__name__
    return {"environs": found, "own": dict(os.environ), "cwd": os.getcwd()}
"""


@pytest.fixture
def host_marks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The worker runs from a directory, and with a variable, that a job must not learn of."""
    workdir = tmp_path / f"{MARK}-workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("CALCGRAPH_SECRET_TOKEN", f"{MARK}-secret")
    monkeypatch.setenv("PWD", str(workdir))


def test_no_visible_process_carries_the_host_environment(
    sandbox_backend: SandboxBackend, run: Runner, host_marks: None
) -> None:
    if sandbox_backend.name == "process" and os.geteuid() != 0:
        pytest.skip("the process backend as a non-root user shares the worker's uid and /proc")
    outputs = contained(run(PROBE))
    environs = outputs["environ" + "s"]
    assert isinstance(environs, dict)
    for pid, text in environs.items():
        assert MARK not in text, f"/proc/{pid}/environ shows the host: {text!r}"
        assert "/work/" not in text, (pid, text)
        assert "/root" not in text, (pid, text)
    if sandbox_backend.name != "process":  # in its own pid namespace, pid 1 is the sandbox's
        assert "1" in environs


def test_own_environment_is_minimal_and_fixed(
    sandbox_backend: SandboxBackend, run: Runner, host_marks: None
) -> None:
    outputs = contained(run(PROBE))
    own = outputs["own"]
    assert isinstance(own, dict)
    assert set(own) <= ALLOWED, own
    assert own["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert own["LANG"] == "C.UTF-8"
    assert not any(MARK in str(value) for value in own.values()), own
    assert MARK not in str(outputs["cwd"])
