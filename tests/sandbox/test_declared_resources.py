"""Contract 11, Resources: a function's declared limits are the ones in force, read back from
the mechanism each backend uses (bwrap: the sandbox's cgroup; docker: the container's host
config), all three of them, the CPU share included (the memory and time ones also fail jobs
in tests/execution/test_resources.py); the process backend says it cannot enforce them."""

from __future__ import annotations

from pathlib import Path

import pytest

from calcgraph.domain.functions.resources import PROFILES
from calcgraph.workers.sandbox import Limits, MiB, SandboxBackend, SandboxSpec
from calcgraph.workers.sandbox.base import declared_limits
from calcgraph.workers.sandbox.session import RunnerSandbox
from tests.sandbox.conftest import CodeFactory

WORKER = Limits(timeout_seconds=20)


def _read(path: str) -> str:
    return Path(path).read_text().strip()


class TestDeclaredLimits:
    def test_the_smaller_of_declared_and_the_workers(self) -> None:
        narrowed = declared_limits(WORKER, {"memory_mb": 256, "cpus": 0.5, "timeout_s": 30})
        assert narrowed is not None
        assert narrowed.memory_bytes == 256 * MiB
        assert narrowed.cpus == 0.5
        assert narrowed.timeout_seconds == 20  # the worker's is smaller
        # What a function does not declare keeps the worker's.
        partial = declared_limits(WORKER, {"cpus": 1})
        assert partial is not None
        assert (partial.memory_bytes, partial.cpus, partial.timeout_seconds) == (
            WORKER.memory_bytes,
            1.0,
            20,
        )
        assert declared_limits(WORKER, None) is None
        assert declared_limits(WORKER, {}) is None


@pytest.mark.parametrize(
    "resources",
    [PROFILES["compute"], {"memory_mb": 384, "cpus": 1.5, "timeout_s": 5}],
    ids=["profile-compute", "resources"],
)
def test_declared_limits_are_in_force(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, resources: dict[str, float]
) -> None:
    if sandbox_backend.resource_refusal is not None:
        # The worker fails such a job with this message (sandbox_error) instead of running it.
        assert "cannot enforce" in sandbox_backend.resource_refusal
        assert sandbox_backend.name == "process"
        return
    limits = declared_limits(WORKER, resources)
    assert limits is not None
    code_dir = make_code(job="def main():\n    return 1\n")
    sandbox = sandbox_backend.start(SandboxSpec(code_dir, "job:main", ("v",), limits))
    assert isinstance(sandbox, RunnerSandbox)
    try:
        memory = int(resources["memory_mb"]) * MiB
        quota = int(resources["cpus"] * 100_000)
        if sandbox_backend.name == "docker":
            attrs = sandbox_backend.client.api.inspect_container(  # type: ignore[attr-defined]
                sandbox.details["container_id"]
            )
            assert attrs["HostConfig"]["Memory"] == memory
            assert attrs["HostConfig"]["NanoCpus"] == int(resources["cpus"] * 1e9)
        else:
            dirs = sandbox.details["cgroups"]
            if "unified" in dirs:
                assert _read(f"{dirs['unified']}/memory.max") == str(memory)
                assert _read(f"{dirs['unified']}/cpu.max") == f"{quota} 100000"
            else:
                assert _read(f"{dirs['memory']}/memory.limit_in_bytes") == str(memory)
                assert _read(f"{dirs['cpu']}/cpu.cfs_quota_us") == str(quota)
        assert sandbox.run({}).status == "success"
    finally:
        sandbox.close()
