"""Issue 27, what one user may spend: a job's code runs at a lower CPU priority than the platform
(`CALCGRAPH_SANDBOX_NICENESS`, 10 steps by default), on every backend, and cannot raise it back.

Real sandboxes on every backend the machine has: the job reads its own niceness; where the
sandbox has a cgroup (bwrap) or a container (docker), its CPU weight is read back from the
kernel's files and the engine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from calcgraph.cli import describe_settings_error
from calcgraph.settings import Settings
from calcgraph.workers.sandbox import Limits, SandboxBackend, SandboxSpec, limits_from
from calcgraph.workers.sandbox.session import RunnerSandbox, verify_status
from tests.sandbox.conftest import TEST_TIMEOUT, CodeFactory, Runner, contained

# The kernel's weight of one process of niceness 0, 7, 10 and 19 (sched_prio_to_weight): what a
# v1 cgroup's cpu.shares and docker's cpu_shares are given; v2's cpu.weight is it * 100 / 1024.
SHARES = {0: 1024, 7: 215, 10: 110, 19: 15}
WEIGHTS = {0: 100, 7: 21, 10: 11, 19: 1}

OWN_PRIORITY = """
import os, subprocess, sys, threading

def main():
    seen = {}
    thread = threading.Thread(target=lambda: seen.update(thread=os.getpriority(os.PRIO_PROCESS, 0)))
    thread.start()
    thread.join()
    child = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import os; print(os.nice(0))"],
        capture_output=True, text=True, check=True,
    )
    return {"nice": os.nice(0), "getpriority": os.getpriority(os.PRIO_PROCESS, 0),
            "thread": seen["thread"], "child": int(child.stdout)}
"""


def _platform() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def _expected(steps: int) -> int:
    return min(19, _platform() + steps)


def _settings() -> Settings:
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize("steps", [None, 0, 7])
def test_a_job_runs_at_the_configured_niceness(
    run: Runner, monkeypatch: pytest.MonkeyPatch, steps: int | None
) -> None:
    """None: the default setting (10). The limits come from the settings as a worker's do."""
    if steps is not None:
        monkeypatch.setenv("CALCGRAPH_SANDBOX_NICENESS", str(steps))
    monkeypatch.setenv("CALCGRAPH_SANDBOX_TIMEOUT_SECONDS", str(TEST_TIMEOUT))
    limits = limits_from(_settings())
    assert limits.niceness == (10 if steps is None else steps)
    seen = contained(run(OWN_PRIORITY, limits_=limits))
    want = _expected(limits.niceness)
    assert seen == {"nice": want, "getpriority": want, "thread": want, "child": want}


@pytest.fixture
def sandbox(sandbox_backend: SandboxBackend, make_code: CodeFactory) -> Iterator[RunnerSandbox]:
    code_dir: Path = make_code(job="def main():\n    return 1\n")
    limits = Limits(timeout_seconds=TEST_TIMEOUT)
    started = sandbox_backend.start(SandboxSpec(code_dir, "job:main", ("v",), limits))
    assert isinstance(started, RunnerSandbox)
    yield started
    started.close()


def test_the_cpu_weight_is_lowered_to_match(
    sandbox_backend: SandboxBackend, sandbox: RunnerSandbox
) -> None:
    """Under a cgroup's cpu controller a niceness competes only inside the cgroup: the
    cgroup's weight (and that of the parent holding every sandbox) says how much it yields."""
    assert int(sandbox.status["Nice"]) == _expected(10)
    mechanism = sandbox_backend.enforcement()["cpu_priority"]
    assert "niceness" in mechanism
    if sandbox_backend.name == "docker":
        _check_container(sandbox_backend, sandbox.details["container_id"])
    elif sandbox_backend.name == "bwrap" and sandbox.details["cgroups"]:
        assert "cpu.weight or cpu.shares" in mechanism
        _check_cgroups(sandbox.details["cgroups"])


def _read(path: Path) -> int:
    return int(path.read_text().strip())


def _check_cgroups(dirs: dict[str, str]) -> None:
    if "unified" in dirs:
        group = Path(dirs["unified"])
        assert _read(group / "cpu.weight") == WEIGHTS[10]
        assert _read(group.parent / "cpu.weight") == WEIGHTS[10]
        return
    group = Path(dirs["cpu"])
    assert _read(group / "cpu.shares") == SHARES[10]
    assert _read(group.parent / "cpu.shares") == SHARES[10]


def _check_container(sandbox_backend: Any, container_id: str) -> None:
    attrs = sandbox_backend.client.api.inspect_container(container_id)
    assert attrs["HostConfig"]["CpuShares"] == SHARES[10]
    # What the engine gave the kernel, where its cgroup is on this host's v1 hierarchy.
    v1 = Path("/sys/fs/cgroup/cpu/docker") / container_id / "cpu.shares"
    if v1.exists():
        assert _read(v1) == SHARES[10]


@pytest.mark.parametrize("steps", [0, 19])
def test_the_weight_follows_the_setting_at_both_ends(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, steps: int
) -> None:
    if sandbox_backend.name == "process":
        pytest.skip("the process backend has no cgroup or container of its own")
    code_dir = make_code(job="def main():\n    return 1\n")
    limits = Limits(timeout_seconds=TEST_TIMEOUT, niceness=steps)
    with sandbox_backend.start(SandboxSpec(code_dir, "job:main", ("v",), limits)) as started:
        assert isinstance(started, RunnerSandbox)
        assert int(started.status["Nice"]) == _expected(steps)
        if sandbox_backend.name == "docker":
            host = sandbox_backend.client.api.inspect_container(  # type: ignore[attr-defined]
                started.details["container_id"]
            )["HostConfig"]
            assert host["CpuShares"] == SHARES[steps]
            return
        dirs = started.details["cgroups"]
        if "unified" in dirs:
            assert _read(Path(dirs["unified"]) / "cpu.weight") == WEIGHTS[steps]
        elif dirs:
            assert _read(Path(dirs["cpu"]) / "cpu.shares") == SHARES[steps]


RAISE_IT_BACK = """
import os, resource, subprocess, sys, threading

def attempt(what, call):
    try:
        call()
    except (OSError, ValueError) as exc:
        return type(exc).__name__
    return "allowed"

def main(platform):
    tries = {
        "nice(-5)": lambda: os.nice(-5),
        "setpriority(platform)": lambda: os.setpriority(os.PRIO_PROCESS, 0, platform),
        "setpriority(-20)": lambda: os.setpriority(os.PRIO_PROCESS, 0, -20),
        "process group": lambda: os.setpriority(os.PRIO_PGRP, 0, platform),
        "user": lambda: os.setpriority(os.PRIO_USER, os.getuid(), platform),
        "RLIMIT_NICE raised": lambda: resource.setrlimit(resource.RLIMIT_NICE, (40, 40)),
    }
    found = {name: attempt(name, call) for name, call in tries.items()}
    in_thread = {}
    thread = threading.Thread(
        target=lambda: in_thread.update(
            r=attempt("thread", lambda: os.setpriority(os.PRIO_PROCESS, 0, platform))
        )
    )
    thread.start()
    thread.join()
    found["thread"] = in_thread["r"]
    child = subprocess.run(
        [sys.executable, "-I", "-S", "-c",
         "import os\\ntry:\\n os.nice(-5); print('allowed')\\nexcept OSError as e:"
         " print(type(e).__name__)"],
        capture_output=True, text=True, check=True,
    )
    found["child"] = child.stdout.strip()
    found["rlimit_nice"] = list(resource.getrlimit(resource.RLIMIT_NICE))
    found["after"] = os.getpriority(os.PRIO_PROCESS, 0)
    return found
"""


def test_a_job_cannot_raise_its_priority_back(run: Runner) -> None:
    seen = contained(run(RAISE_IT_BACK, {"platform": _platform()}))
    after = seen.pop("after")
    assert seen.pop("rlimit_nice") == [0, 0]
    refused = {name: outcome for name, outcome in seen.items() if outcome != "allowed"}
    assert refused == seen, f"allowed: {sorted(set(seen) - set(refused))}"
    assert after == _expected(10)


@pytest.mark.parametrize("value", ["-5", "20", "100", "ten", "2.5", ""])
def test_a_bad_setting_is_refused_at_load(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CALCGRAPH_SANDBOX_NICENESS", value)
    with pytest.raises(ValidationError) as caught:
        _settings()
    message = describe_settings_error(caught.value)
    assert "CALCGRAPH_SANDBOX_NICENESS must be a whole number from 0" in message
    assert "to 19" in message
    assert repr(value) in message


def test_a_bad_value_given_in_code_is_refused_too() -> None:
    for value in (-1, 20, 2.5, True):
        with pytest.raises(ValidationError, match="CALCGRAPH_SANDBOX_NICENESS"):
            Settings(_env_file=None, sandbox_niceness=value)  # type: ignore[call-arg]


def test_a_runner_above_its_priority_is_refused() -> None:
    """The host never takes a sandbox that did not lower itself as configured."""
    status = {"Uid": "65534", "CapEff": "0", "CapPrm": "0", "NoNewPrivs": "1", "Nice": "0"}
    problem = verify_status(status, 10)
    assert problem is not None
    assert "niceness 0" in problem
    assert verify_status({**status, "Nice": "10"}, 10) is None
    assert verify_status({**status, "Nice": "12"}, 10) is None
