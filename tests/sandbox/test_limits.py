"""The specification's worker limits, read back from the mechanism each backend uses for them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calcgraph.workers.sandbox import GiB, Limits, MiB, SandboxBackend, SandboxSpec
from calcgraph.workers.sandbox.session import RunnerSandbox
from tests.sandbox.conftest import CodeFactory

SPEC_LIMITS = Limits(timeout_seconds=20)


@pytest.fixture
def sandbox(sandbox_backend: SandboxBackend, make_code: CodeFactory) -> Iterator[RunnerSandbox]:
    code_dir: Path = make_code(job="def main():\n    return 1\n")
    started = sandbox_backend.start(SandboxSpec(code_dir, "job:main", ("v",), SPEC_LIMITS))
    assert isinstance(started, RunnerSandbox)
    yield started
    started.close()


def _read(path: str) -> str:
    return Path(path).read_text().strip()


def test_specification_defaults() -> None:
    limits = Limits()
    assert limits.timeout_seconds == 300
    assert limits.memory_bytes == 2 * GiB
    assert limits.tmp_bytes == 512 * MiB
    assert limits.cpus == 2
    assert limits.output_bytes == 64 * 1024


def test_limits_in_force(sandbox_backend: SandboxBackend, sandbox: RunnerSandbox) -> None:
    assert sandbox.status["NoNewPrivs"] == "1"
    assert int(sandbox.status["CapEff"], 16) == 0
    if sandbox_backend.name == "docker":
        _check_container(sandbox_backend, sandbox.details["container_id"])
    elif sandbox_backend.name == "bwrap":
        _check_cgroups(sandbox.details["cgroups"])
    else:
        _check_rlimits(sandbox.details["pid"])


def _check_container(sandbox_backend: Any, container_id: str) -> None:
    attrs = sandbox_backend.client.api.inspect_container(container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == 2 * GiB
    assert host["MemorySwap"] == 2 * GiB
    assert host["NanoCpus"] == 2_000_000_000
    assert host["PidsLimit"] == SPEC_LIMITS.pids
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert f"size={512 * MiB}" in host["Tmpfs"]["/tmp"]
    assert attrs["Config"]["User"] == "65534:65534"


def _check_cgroups(dirs: dict[str, str]) -> None:
    if "unified" in dirs:
        d = dirs["unified"]
        assert _read(f"{d}/memory.max") == str(2 * GiB)
        assert _read(f"{d}/pids.max") == str(SPEC_LIMITS.pids)
        assert _read(f"{d}/cpu.max") == "200000 100000"
        return
    assert _read(f"{dirs['memory']}/memory.limit_in_bytes") == str(2 * GiB)
    assert _read(f"{dirs['pids']}/pids.max") == str(SPEC_LIMITS.pids)
    assert _read(f"{dirs['cpu']}/cpu.cfs_quota_us") == "200000"
    assert _read(f"{dirs['cpu']}/cpu.cfs_period_us") == "100000"
    # Every process of the sandbox is in the cgroups (bwrap joined them before it exec'ed).
    assert _read(f"{dirs['pids']}/cgroup.procs").split()


def _check_rlimits(pid: int) -> None:
    limits = {
        line[:26].strip(): line[26:].split()
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    }
    assert limits["Max address space"][:2] == [str(2 * GiB)] * 2
    assert limits["Max file size"][:2] == [str(512 * MiB)] * 2
    assert limits["Max processes"][0] != "unlimited"
    assert limits["Max core file size"][:2] == ["0", "0"]
    assert len(Path(f"/proc/{pid}/status").read_text().split("Cpus_allowed_list:")[1]) > 0


def test_sandbox_is_gone_after_close(
    sandbox_backend: SandboxBackend, sandbox: RunnerSandbox
) -> None:
    sandbox.close()
    assert not sandbox.alive
    if sandbox_backend.name == "docker":
        from docker.errors import NotFound

        with pytest.raises(NotFound):
            sandbox_backend.client.api.inspect_container(sandbox.details["container_id"])  # type: ignore[attr-defined]
    elif sandbox_backend.name == "bwrap":
        assert all(not Path(d).exists() for d in sandbox.details["cgroups"].values())
    else:
        assert not Path(f"/proc/{sandbox.details['pid']}").exists()


WORKER = """
import json, sys
from pathlib import Path
from calcgraph.settings import Settings
from calcgraph.workers.sandbox import Limits, SandboxSpec, create_backend

backend = create_backend(Settings(_env_file=None), kind=sys.argv[1])
sandbox = backend.start(SandboxSpec(Path(sys.argv[2]), "job:main", (), Limits(timeout_seconds=60)))
print(json.dumps(sandbox.details), flush=True)
sandbox.run({})  # sleeps until the worker is killed
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_sandbox_dies_with_a_crashed_worker(
    sandbox_backend: SandboxBackend, make_code: CodeFactory
) -> None:
    """A worker killed mid-job leaves nothing running: the parent-death signal ends bwrap and
    process sandboxes, and the next docker backend of the host removes the orphaned container."""
    import json
    import signal
    import subprocess
    import sys
    import time

    code_dir = make_code(job="import time\ndef main():\n    time.sleep(301)\n")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, sandbox_backend.name, str(code_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert worker.stdout is not None
    details = json.loads(worker.stdout.readline())
    worker.stdout.close()
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    if sandbox_backend.name == "docker":
        from docker.errors import NotFound

        from calcgraph.workers.sandbox.docker import DockerBackend

        DockerBackend(base_url=sandbox_backend.base_url).close()  # type: ignore[attr-defined]
        with pytest.raises(NotFound):
            sandbox_backend.client.api.inspect_container(details["container_id"])  # type: ignore[attr-defined]
        return
    deadline = time.monotonic() + 5
    while not _gone(details["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(details["pid"])
    if sandbox_backend.name == "process":
        from calcgraph.workers.sandbox.process import ProcessBackend

        staged = Path(details["code_dir"]).parent
        assert staged.exists()
        ProcessBackend()  # the next worker of the machine clears what the crashed one left
        assert not staged.exists()
