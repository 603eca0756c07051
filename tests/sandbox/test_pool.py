"""The warm pool: a warm sandbox has the handler imported and runs the next job without a start."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import Limits, RunRequest, SandboxBackend, WarmPool
from tests.sandbox.conftest import CodeFactory

COUNTER = """
import os
imports = 0
imports += 1
calls = 0

def main(x):
    global calls
    calls += 1
    return {"y": x + 1, "calls": calls, "imports": imports, "pid": os.getpid()}
"""


@pytest.fixture
def code_dir(make_code: CodeFactory) -> Path:
    return make_code(job=COUNTER)


def request(code_dir: Path, x: int = 1, **kwargs: object) -> RunRequest:
    limits = kwargs.pop("limits", Limits(timeout_seconds=20))
    return RunRequest(code_dir, "job:main", {"x": x}, ("y", "calls", "imports", "pid"), limits)  # type: ignore[arg-type]


def test_second_job_runs_warm(sandbox_backend: SandboxBackend, code_dir: Path) -> None:
    pool = WarmPool(sandbox_backend, max_size=4)
    try:
        first = pool.run("fv-1", request(code_dir, 1))
        second = pool.run("fv-1", request(code_dir, 2))
        assert first.outputs is not None
        assert second.outputs is not None
        assert (first.outputs["y"], second.outputs["y"]) == (2, 3)
        # Same process, handler imported once, module state kept between jobs.
        assert second.outputs["pid"] == first.outputs["pid"]
        assert second.outputs["imports"] == 1
        assert second.outputs["calls"] == 2
        assert (pool.stats.starts, pool.stats.hits) == (1, 1)
        assert len(pool) == 1
    finally:
        pool.close()


def test_many_jobs_on_one_warm_sandbox(sandbox_backend: SandboxBackend, code_dir: Path) -> None:
    # Speed is measured by the benchmarks; here only that the warm path never starts again.
    pool = WarmPool(sandbox_backend, max_size=1)
    try:
        pool.warm("fv-1", request(code_dir).spec)
        pids = set()
        for i in range(30):
            result = pool.run("fv-1", request(code_dir, i))
            assert result.outputs is not None
            pids.add(result.outputs["pid"])
        assert pool.stats.starts == 1
        assert pool.stats.hits == 30
        assert len(pids) == 1
    finally:
        pool.close()


def test_least_recently_used_is_evicted(
    sandbox_backend: SandboxBackend, make_code: CodeFactory
) -> None:
    dirs = {key: make_code(job=COUNTER) for key in ("a", "b", "c")}
    pool = WarmPool(sandbox_backend, max_size=2)
    try:
        pool.run("a", request(dirs["a"]))
        pool.run("b", request(dirs["b"]))
        pool.run("a", request(dirs["a"]))  # a is now more recent than b
        pool.run("c", request(dirs["c"]))  # evicts b
        assert pool.keys() == ["a", "c"]
        assert pool.stats.evictions == 1
        assert pool.stats.starts == 3
        pool.run("b", request(dirs["b"]))  # cold again; evicts a
        assert pool.stats.starts == 4
        assert pool.keys() == ["c", "b"]
    finally:
        pool.close()
    assert len(pool) == 0


def test_dead_sandbox_is_not_given_back(
    sandbox_backend: SandboxBackend, make_code: CodeFactory
) -> None:
    source = "import time\ndef main(x):\n    time.sleep(x)\n    return x\n"
    code_dir = make_code(job=source)
    limits = Limits(timeout_seconds=2 if sandbox_backend.name != "docker" else 4)
    pool = WarmPool(sandbox_backend, max_size=4)
    try:
        slow = pool.run("fv", RunRequest(code_dir, "job:main", {"x": 301}, ("x",), limits))
        assert slow.error is not None
        assert slow.error.kind == "timeout"
        assert len(pool) == 0
        fast = pool.run("fv", RunRequest(code_dir, "job:main", {"x": 0}, ("x",), limits))
        assert fast.outputs == {"x": 0}
        assert pool.stats.starts == 2
    finally:
        pool.close()


def test_changed_spec_replaces_the_warm_sandbox(
    sandbox_backend: SandboxBackend, code_dir: Path
) -> None:
    pool = WarmPool(sandbox_backend, max_size=4)
    try:
        pool.run("fv", request(code_dir))
        other = request(code_dir, limits=Limits(timeout_seconds=21))
        assert pool.run("fv", other).status == "success"
        assert pool.stats.starts == 2
        assert pool.stats.discarded == 1
        assert len(pool) == 1
    finally:
        pool.close()


def test_concurrent_jobs_of_one_version(sandbox_backend: SandboxBackend, code_dir: Path) -> None:
    pool = WarmPool(sandbox_backend, max_size=4)
    source_dir = code_dir.parent / "slow"
    source_dir.mkdir()
    (source_dir / "job.py").write_text(
        "import time\ndef main(x):\n    time.sleep(0.5)\n    return x\n"
    )
    results: list[object] = []

    def one(x: int) -> None:
        results.append(pool.run("fv", RunRequest(source_dir, "job:main", {"x": x}, ("x",))))

    try:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.outputs["x"] for r in results) == [0, 1]  # type: ignore[attr-defined]
        assert pool.stats.starts == 2  # one sandbox runs one job at a time
        assert len(pool) == 2
    finally:
        pool.close()


def test_sandbox_outlives_the_thread_that_started_it(
    sandbox_backend: SandboxBackend, code_dir: Path
) -> None:
    """The kernel's parent-death signal follows the forking thread: job threads come and go."""
    pool = WarmPool(sandbox_backend, max_size=4)
    try:
        starter = threading.Thread(target=pool.warm, args=("fv", request(code_dir).spec))
        starter.start()
        starter.join()
        result = pool.run("fv", request(code_dir, 5))
        assert result.outputs is not None, result
        assert result.outputs["y"] == 6
        assert (pool.stats.starts, pool.stats.hits) == (1, 1)
    finally:
        pool.close()


def test_size_zero_keeps_nothing(sandbox_backend: SandboxBackend, code_dir: Path) -> None:
    pool = WarmPool(sandbox_backend, max_size=0)
    pool.run("fv", request(code_dir))
    pool.run("fv", request(code_dir))
    assert (pool.stats.starts, len(pool)) == (2, 0)
